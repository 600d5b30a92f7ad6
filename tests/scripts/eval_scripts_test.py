"""The evaluation scripts (scripts/eval_lib.sh, scripts/eval_*.sh, scripts/eval_table.py):
the /usr/bin/time parser on reports this machine's GNU time writes in each format, the tables'
CPU and commit columns, and, where crux-sim is built (CRUX_SIM), a real run of the library end to
end: runs recorded with their command, time report and commit, resumed when done, and tabled.

Run by ctest (tests/CMakeLists.txt) with Debian's /usr/bin/python3 -m pytest.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

SRC = os.environ.get("CRUX_SOURCE_DIR",
                     os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.join(SRC, "scripts"))
import eval_table  # noqa: E402

TIME = "/usr/bin/time"
# Burns a little CPU so user time is visible, and exits with the given status.
BUSY = [sys.executable, "-c",
        "import sys; sum(i * i for i in range(3_000_000)); sys.exit(int(sys.argv[1]))"]


def time_report(tmp_path, flags, status=0):
    out = tmp_path / "time.txt"
    subprocess.run([TIME, *flags, "-o", str(out), *BUSY, str(status)], check=False)
    return out.read_text()


@pytest.mark.skipif(not os.access(TIME, os.X_OK), reason="no /usr/bin/time")
@pytest.mark.parametrize("flags", [[], ["-v"], ["-p"], ["-f", "%U %S %M"]],
                         ids=["default", "verbose", "posix", "custom"])
@pytest.mark.parametrize("status", [0, 3], ids=["ok", "failed"])
def test_parse_time_reads_every_format_of_this_machines_time(tmp_path, flags, status):
    text = time_report(tmp_path, flags, status)
    cpu, rss = eval_table.parse_time(text)
    assert cpu is not None and 0.01 < cpu < 60, text
    if flags == ["-p"]:
        assert rss is None  # POSIX format has no memory figure.
    else:
        assert rss is not None and rss > 1000, text  # a Python interpreter: MBs, in KB


def test_parse_time_returns_nothing_for_text_that_is_no_report():
    assert eval_table.parse_time("") == (None, None)
    assert eval_table.parse_time("crux-sim: error: no such file\n") == (None, None)


def test_parse_time_reads_known_default_and_verbose_lines_exactly():
    default = ("12.50user 0.25system 0:12.80elapsed 99%CPU (0avgtext+0avgdata "
               "204800maxresident)k\n0inputs+8outputs (0major+100minor)pagefaults 0swaps\n")
    assert eval_table.parse_time(default) == (12.75, 204800)
    verbose = ("\tCommand being timed: \"x\"\n\tUser time (seconds): 1.50\n"
               "\tSystem time (seconds): 0.50\n\tMaximum resident set size (kbytes): 4096\n")
    assert eval_table.parse_time(verbose) == (2.0, 4096)
    assert eval_table.parse_time("Command exited with non-zero status 1\n2.00 1.00 300\n") == \
        (3.0, 300)


def write_run(d, gpu, work, time_text, commit=None, iterations=10):
    os.makedirs(d, exist_ok=True)
    summary = {"gpu_utilization": gpu, "work_utilization": work, "events": 1234,
               "jobs": [{"slowdown": 1.0, "iterations": iterations},
                        {"slowdown": 1.5, "iterations": iterations}]}
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f)
    with open(os.path.join(d, "time.txt"), "w") as f:
        f.write(time_text)
    if commit:
        with open(os.path.join(d, "run.json"), "w") as f:
            json.dump({"commit": commit}, f)


def test_tables_carry_cpu_seconds_and_commit_per_run(tmp_path):
    default = "3.00user 1.00system 0:04.10elapsed 97%CPU (0avgtext+0avgdata 8192maxresident)k\n"
    write_run(tmp_path / "clos" / "crux", 1.0, 1.0, default, "abc1234")
    write_run(tmp_path / "clos" / "ecmp", 0.8, 0.75, "1.00 1.00 2048\n", "abc1234")
    write_run(tmp_path / "dual" / "crux", 1.0, 1.0, "user 2.00\nsys 0.00\n", "def5678")

    runs = eval_table.runs_table(str(tmp_path))
    lines = runs.splitlines()
    row = next(r for r in lines if r.startswith("| clos/crux "))
    assert "| 4.0 |" in row and "| 8 |" in row and row.endswith("| abc1234 |"), row
    assert "| 20 |" in row  # iterations of both jobs
    assert next(r for r in lines if r.startswith("| clos/ecmp ")).count("| 2.0 |") == 1
    assert next(r for r in lines if r.startswith("| dual/crux ")).endswith("| - | def5678 |")

    m = eval_table.matrix(str(tmp_path)).splitlines()
    assert m[0] == ("| row | crux | ecmp | crux / best baseline (GPU) | crux / ecmp | CPU s "
                    "| commit |")
    assert m[2] == "| clos | 1.0000 | 0.8000 / 0.7500 | 1.250 (ecmp) | 1.250 | 6.0 | abc1234 |"
    assert m[3] == "| dual | 1.0000 | - | - | - | 2.0 | def5678 |"


def test_a_run_without_a_time_report_or_commit_says_so(tmp_path):
    write_run(tmp_path / "a", 0.5, 0.5, "")
    row = eval_table.runs_table(str(tmp_path)).splitlines()[2]
    assert row.endswith("| - | - | - |"), row


def test_traces_table_reads_gen_trace_reports(tmp_path):
    report = {"jobs": 5086, "offered_load": 0.58, "share_jobs_may_contend": 0.136,
              "share_gpus_may_contend": 0.473, "share_ge_128_gpus": 0.115,
              "peak_concurrent_jobs": 50, "peak_gpus": 2761}
    (tmp_path / "clos-scatter0.50.json").write_text(json.dumps(report))
    row = eval_table.traces(str(tmp_path)).splitlines()[2]
    assert row == "| clos-scatter0.50 | 5,086 | 0.58 | 13.6% | 47.3% | 11.5% | 50 / 2,761 |"


SIM = os.environ.get("CRUX_SIM", "")


@pytest.mark.skipif(not (SIM and os.access(SIM, os.X_OK)), reason="CRUX_SIM not built")
def test_the_library_runs_records_resumes_and_tables_real_crux_sim_runs(tmp_path):
    out = tmp_path / "eval"
    cmd = ["bash", os.path.join(SRC, "scripts", "eval_fig23.sh"), "--out", str(out), "-j", "2",
           "--horizon-s", "30", "--policies", "ecmp,crux",
           os.path.join(SRC, "configs", "scenarios", "testbed_pair.yaml")]
    env = dict(os.environ, CRUX_SIM=SIM)
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.count("ok   testbed_pair/") == 2, first.stdout
    for p in ("ecmp", "crux"):
        d = out / "testbed_pair" / p
        cmdline = (d / "cmd.txt").read_text().splitlines()
        assert cmdline[:4] == ["run", "--scenario",
                               os.path.join(SRC, "configs", "scenarios", "testbed_pair.yaml"),
                               "--policy"] and cmdline[-2:] == ["--out", str(d)]
        run = json.loads((d / "run.json").read_text())
        assert run["commit"] and run["sim"] == SIM
        cpu, rss = eval_table.parse_time((d / "time.txt").read_text())
        assert cpu is not None and rss is not None
    table = (out / "testbed_pair" / "table.md").read_text()
    commit = json.loads((out / "testbed_pair" / "crux" / "run.json").read_text())["commit"]
    assert f"| {commit} |" in table, table
    assert "crux / ecmp" not in table and "| crux |" in table

    # Done runs are kept; --force runs them again.
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.count("(kept)") == 2, again.stdout
    forced = subprocess.run(cmd + ["--force"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert forced.returncode == 0 and forced.stdout.count("ok   testbed_pair/") == 2


@pytest.mark.skipif(not (SIM and os.access(SIM, os.X_OK)), reason="CRUX_SIM not built")
def test_a_failing_run_is_reported_and_the_others_go_on(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("scenario: [not, a, mapping\n")
    good = os.path.join(SRC, "configs", "scenarios", "testbed_pair.yaml")
    r = subprocess.run(["bash", os.path.join(SRC, "scripts", "eval_fig23.sh"), "--out",
                        str(tmp_path / "eval"), "--horizon-s", "30", "--policies", "crux",
                        str(bad), good], env=dict(os.environ, CRUX_SIM=SIM),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL broken/crux" in r.stdout and "ok   testbed_pair/crux" in r.stdout


@pytest.mark.parametrize("script", sorted(
    f for f in os.listdir(os.path.join(SRC, "scripts"))
    if f.startswith("eval_s") and f.endswith(".sh")))
def test_every_section_script_lists_its_runs_without_running_them(tmp_path, script):
    if not (SIM and os.access(SIM, os.X_OK)):
        pytest.skip("CRUX_SIM not built")
    r = subprocess.run(["bash", os.path.join(SRC, "scripts", script), "--dry-run", "--out",
                        str(tmp_path / "eval")], env=dict(os.environ, CRUX_SIM=SIM),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(SIM + " ")]
    assert lines, r.stdout
    assert all(" --out " in x for x in lines)
    assert not any((tmp_path / "eval").glob("*/summary.json"))
    h = subprocess.run(["bash", os.path.join(SRC, "scripts", script), "--help"],
                       env=dict(os.environ, CRUX_SIM=SIM), capture_output=True, text=True)
    assert h.returncode == 0 and "docs/evaluation.md" in h.stdout and "--out" in h.stdout
