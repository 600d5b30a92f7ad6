// TestPki: throwaway certificates for the etcd TLS tests, made by the openssl command line in a
// test's temporary directory (P-256 keys, valid for a day) - the commands docs/daemon.md "etcd
// over TLS" gives operators. Available() is false when /usr/bin/openssl is missing
// (scripts/deps.sh installs it).
//
// Thread-safety: test thread only.
#ifndef CRUX_TESTS_HA_TEST_PKI_H_
#define CRUX_TESTS_HA_TEST_PKI_H_

#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "../system/process_util.h"

namespace crux::ha_test {

inline constexpr const char* kOpensslBinary = "/usr/bin/openssl";

class TestPki {
 public:
  static bool Available() { return ::access(kOpensslBinary, X_OK) == 0; }

  // Certificates go to `dir` (which must exist) as <name>.crt / <name>.key.
  explicit TestPki(system_test::fs::path dir) : dir_(std::move(dir)) {}

  // A self-signed CA `name`. False (and error()) when openssl fails.
  bool MakeCa(const std::string& name) {
    return Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", Key(name), "-out", Crt(name), "-days", "1", "-subj",
                    "/CN=" + name});
  }

  // A certificate `name` for `subject` ("/O=cruxd"; "/CN=root"), signed by CA `ca`, usable by
  // servers and clients; `san` ("IP:127.0.0.1") as its subjectAltName when not empty.
  bool Issue(const std::string& ca, const std::string& name, const std::string& subject,
             const std::string& san = "") {
    const std::string ext = (dir_ / (name + ".ext")).string();
    system_test::WriteFile(ext,
                           "basicConstraints=CA:FALSE\n"
                           "keyUsage=digitalSignature,keyEncipherment\n"
                           "extendedKeyUsage=serverAuth,clientAuth\n" +
                               (san.empty() ? "" : "subjectAltName=" + san + "\n"));
    const std::string csr = (dir_ / (name + ".csr")).string();
    return Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", Key(name), "-out", csr, "-subj", subject}) &&
           Openssl({"x509", "-req", "-in", csr, "-CA", Crt(ca), "-CAkey", Key(ca), "-set_serial",
                    std::to_string(++serial_), "-days", "1", "-extfile", ext, "-out", Crt(name)});
  }

  std::string Crt(const std::string& name) const { return (dir_ / (name + ".crt")).string(); }
  std::string Key(const std::string& name) const { return (dir_ / (name + ".key")).string(); }
  const std::string& error() const { return error_; }

 private:
  bool Openssl(std::vector<std::string> args) {
    args.insert(args.begin(), kOpensslBinary);
    const system_test::CommandResult r =
        system_test::RunCommand(args, dir_, std::chrono::milliseconds(10000));
    if (r.exit_code != 0) error_ = "openssl " + args[1] + ": " + r.err;
    return r.exit_code == 0;
  }

  system_test::fs::path dir_;
  int serial_ = 0;
  std::string error_;
};

}  // namespace crux::ha_test

#endif  // CRUX_TESTS_HA_TEST_PKI_H_
