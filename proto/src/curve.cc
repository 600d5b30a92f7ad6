#include "crux/protocol/curve.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crux/core/base/text.h"

namespace crux::protocol {
namespace {

namespace fs = std::filesystem;

// Parsed key file: values of "public-key" and "secret-key" ("" when absent).
struct KeyFile {
  std::string public_z85;
  std::string secret_z85;
};

core::Result<KeyFile> ParseKeyFile(const std::string& path, const std::string& text) {
  KeyFile out;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF.
    const std::string_view t = core::Trim(line);
    if (t.empty() || t[0] == '#') continue;
    const size_t eq = t.find('=');
    const std::string where = path + ":" + std::to_string(line_no);
    if (eq == std::string::npos) {
      return core::InvalidArgumentError(where + ": expected `name = value`");
    }
    const std::string name(core::Trim(t.substr(0, eq)));
    std::string value(core::Trim(t.substr(eq + 1)));
    std::string* slot = nullptr;
    if (name == "public-key") {
      slot = &out.public_z85;
    } else if (name == "secret-key") {
      slot = &out.secret_z85;
    } else {
      return core::InvalidArgumentError(where + ": unknown name \"" + name +
                                        "\" (allowed: public-key, secret-key)");
    }
    if (!slot->empty()) return core::InvalidArgumentError(where + ": duplicate " + name);
    if (!IsValidZ85Key(value)) {
      return core::InvalidArgumentError(where + ": " + name +
                                        ": not a 40-character Z85 CurveZMQ key");
    }
    *slot = std::move(value);
  }
  if (out.public_z85.empty()) return core::InvalidArgumentError(path + ": public-key: missing");
  return out;
}

core::Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::NotFoundError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > 64 * 1024)
    return core::InvalidArgumentError(path + ": too large for a key file");
  return text;
}

// Creates `path` with `mode` (exclusive unless overwrite) and writes `text`. The mode is set at
// creation, so a secret never exists with wider permissions.
core::Status WriteFileWithMode(const std::string& path, const std::string& text, mode_t mode,
                               bool overwrite) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
  int fd = ::open(path.c_str(), flags, mode);
  if (fd < 0) {
    if (errno == EEXIST) return core::AlreadyExistsError(path + ": exists (not overwriting)");
    return core::UnavailableError(path + ": cannot create (" + std::strerror(errno) + ")");
  }
  // O_CREAT honours the umask and an existing file keeps its mode: force it.
  if (::fchmod(fd, mode) != 0) {
    int err = errno;
    ::close(fd);
    return core::UnavailableError(path + ": chmod failed (" + std::strerror(err) + ")");
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return core::UnavailableError(path + ": write failed (" + std::strerror(err) + ")");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    return core::UnavailableError(path + ": sync/close failed (" + std::strerror(errno) + ")");
  }
  return core::Status::Ok();
}

}  // namespace

bool IsValidZ85Key(std::string_view key) {
  if (key.size() != kZ85KeyLength) return false;
  std::string copy(key);
  std::array<uint8_t, 32> raw{};
  return zmq_z85_decode(raw.data(), copy.c_str()) != nullptr;
}

core::Result<CurveKeyPair> GenerateCurveKeyPair() {
  std::array<char, 41> pub{};
  std::array<char, 41> sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    return core::UnavailableError(std::string("curve: key generation failed (") +
                                  zmq_strerror(zmq_errno()) + "); is libzmq built with CURVE?");
  }
  return CurveKeyPair{std::string(pub.data(), 40), std::string(sec.data(), 40)};
}

core::Result<std::string> DerivePublicKey(std::string_view secret_z85) {
  if (!IsValidZ85Key(secret_z85)) {
    return core::InvalidArgumentError("secret-key: not a 40-character Z85 CurveZMQ key");
  }
  std::string sec(secret_z85);
  std::array<char, 41> pub{};
  if (zmq_curve_public(pub.data(), sec.c_str()) != 0) {
    return core::InvalidArgumentError(std::string("secret-key: cannot derive public key (") +
                                      zmq_strerror(zmq_errno()) + ")");
  }
  return std::string(pub.data(), 40);
}

core::Status SaveKeyPair(const CurveKeyPair& keys, const std::string& base, bool overwrite) {
  if (!IsValidZ85Key(keys.public_z85)) {
    return core::InvalidArgumentError("public-key: not a 40-character Z85 CurveZMQ key");
  }
  CRUX_ASSIGN_OR_RETURN(std::string derived, DerivePublicKey(keys.secret_z85));
  if (derived != keys.public_z85) {
    return core::InvalidArgumentError("public-key: does not match secret-key");
  }
  const std::string key_path = base + ".key";
  const std::string pub_path = base + ".pub";
  if (!overwrite) {
    std::error_code ec;
    if (fs::exists(key_path, ec)) return core::AlreadyExistsError(key_path + ": exists");
    if (fs::exists(pub_path, ec)) return core::AlreadyExistsError(pub_path + ": exists");
  }
  std::string secret_text =
      "# Crux CurveZMQ secret key - keep private (mode 0600)\npublic-key = " + keys.public_z85 +
      "\nsecret-key = " + keys.secret_z85 + "\n";
  CRUX_RETURN_IF_ERROR(WriteFileWithMode(key_path, secret_text, 0600, overwrite));
  return SavePublicKey(keys.public_z85, pub_path, overwrite);
}

core::Status SavePublicKey(std::string_view public_z85, const std::string& path, bool overwrite) {
  if (!IsValidZ85Key(public_z85)) {
    return core::InvalidArgumentError("public-key: not a 40-character Z85 CurveZMQ key");
  }
  std::string text = "# Crux CurveZMQ public key\npublic-key = " + std::string(public_z85) + "\n";
  return WriteFileWithMode(path, text, 0644, overwrite);
}

core::Result<CurveKeyPair> LoadSecretKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return core::NotFoundError(path + ": cannot stat (" + std::strerror(errno) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return core::FailedPreconditionError(path + ": secret key file has mode " + mode +
                                         "; it must not be accessible by group or others "
                                         "(chmod 600)");
  }
  CRUX_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  CRUX_ASSIGN_OR_RETURN(KeyFile file, ParseKeyFile(path, text));
  if (file.secret_z85.empty()) return core::InvalidArgumentError(path + ": secret-key: missing");
  CRUX_ASSIGN_OR_RETURN(std::string derived, DerivePublicKey(file.secret_z85));
  if (derived != file.public_z85) {
    return core::InvalidArgumentError(path + ": public-key: does not match secret-key");
  }
  return CurveKeyPair{file.public_z85, file.secret_z85};
}

core::Result<std::string> LoadPublicKeyFile(const std::string& path) {
  CRUX_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  CRUX_ASSIGN_OR_RETURN(KeyFile file, ParseKeyFile(path, text));
  return file.public_z85;
}

namespace {

std::string RoleName(KeyRole role) {
  switch (role) {
    case KeyRole::kJob:
      return "a job key";
    case KeyRole::kSwitch:
      return "a switch key";
    case KeyRole::kHost:
      return "a host key";
  }
  return "a key";
}

core::Status LoadKeysIn(const fs::path& dir, KeyRole role, std::vector<AuthorizedKey>* keys) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".pub") continue;
    std::error_code fec;
    if (!fs::is_regular_file(p, fec)) continue;
    CRUX_ASSIGN_OR_RETURN(std::string key, LoadPublicKeyFile(p.string()));
    AuthorizedKey k;
    k.name = p.stem().string();
    k.public_z85 = std::move(key);
    k.role = role;
    if (role == KeyRole::kSwitch) k.switch_name = k.name;
    if (role == KeyRole::kHost) k.host_name = k.name;
    k.path = p.string();
    keys->push_back(std::move(k));
  }
  if (ec) return core::UnavailableError(dir.string() + ": cannot list (" + ec.message() + ")");
  return core::Status::Ok();
}

}  // namespace

core::Result<std::vector<AuthorizedKey>> LoadAuthorizedKeys(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return core::NotFoundError(dir + ": authorised-keys directory does not exist");
  }
  std::vector<AuthorizedKey> keys;
  CRUX_RETURN_IF_ERROR(LoadKeysIn(dir, KeyRole::kJob, &keys));
  const fs::path switches = fs::path(dir) / "switches";
  if (fs::is_directory(switches, ec)) {
    CRUX_RETURN_IF_ERROR(LoadKeysIn(switches, KeyRole::kSwitch, &keys));
  }
  const fs::path hosts = fs::path(dir) / "hosts";
  if (fs::is_directory(hosts, ec)) {
    CRUX_RETURN_IF_ERROR(LoadKeysIn(hosts, KeyRole::kHost, &keys));
  }
  std::sort(keys.begin(), keys.end(), [](const AuthorizedKey& a, const AuthorizedKey& b) {
    if (a.role != b.role) return static_cast<int>(a.role) < static_cast<int>(b.role);
    return a.name < b.name;
  });
  return keys;
}

core::Result<KeyGrants> GrantsOf(const std::vector<AuthorizedKey>& keys) {
  KeyGrants grants;
  std::map<std::string, std::string> first_file;  // key -> file that granted it first
  for (const AuthorizedKey& k : keys) {
    auto [it, fresh] = grants.try_emplace(k.public_z85);
    KeyGrant& g = it->second;
    if (fresh) {
      g.role = k.role;
      g.name = k.name;
      first_file[k.public_z85] = k.path.empty() ? k.name : k.path;
    } else if (g.role != k.role) {
      return core::InvalidArgumentError(
          (k.path.empty() ? k.name : k.path) + ": this key is also " + RoleName(g.role) + " in " +
          first_file[k.public_z85] +
          "; a key is a job key, a switch key or a host key, never two of them (give the agent a "
          "key of its own)");
    }
    if (k.role == KeyRole::kSwitch) g.switches.push_back(k.switch_name);
    if (k.role == KeyRole::kHost) g.hosts.push_back(k.host_name);
  }
  for (auto& [key, g] : grants) {
    std::sort(g.switches.begin(), g.switches.end());
    g.switches.erase(std::unique(g.switches.begin(), g.switches.end()), g.switches.end());
    std::sort(g.hosts.begin(), g.hosts.end());
    g.hosts.erase(std::unique(g.hosts.begin(), g.hosts.end()), g.hosts.end());
  }
  return grants;
}

}  // namespace crux::protocol
