// CurveZMQ key pairs and key files.
//
// Keys are Z85 strings of 40 characters (32-byte Curve25519 keys). Key file format (plain text,
// one `name = value` per line, '#' starts a comment line, blank lines ignored, unknown names are
// an error):
//
//   # Crux CurveZMQ public key            <- <name>.pub, mode 0644
//   public-key = rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7
//
//   # Crux CurveZMQ secret key - keep private   <- <name>.key, mode 0600
//   public-key = rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7
//   secret-key = JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6
//
// A secret file's public key must match its secret key. Loading a secret file that is readable
// by group or others is refused (like ssh), so a leaked-permission key is noticed.
//
// An authorised-keys directory holds one `*.pub` file per peer (other files are ignored); the
// file stem names the peer in logs. Roles (docs/protocol.md "Identities and roles"):
//   <dir>/*.pub                job keys: may register jobs and speak for the jobs they
//                              registered (RegisterJob, ProfileReport, Heartbeat, EndJob, Ack);
//   <dir>/switches/<name>.pub  a switch key for the switch <name> (a topology switch name): may
//                              send SwitchHello/SwitchApplied for that switch only. One agent
//                              serving several switches has one file per switch (same key).
//   <dir>/hosts/<host>.pub     a host key for the host <host> (a topology host name), used by
//                              crux-hostd: may send HostTelemetry for that host only, and the
//                              job messages (it speaks for the jobs of its host, bound to the key
//                              like any job's). One agent serving several hosts has one file per
//                              host (same key).
// A key has one role: job, switch or host (an error naming both files otherwise).
//
// Thread-safety: functions are independent; concurrent writes to the same path race.
#ifndef CRUX_PROTOCOL_CURVE_H_
#define CRUX_PROTOCOL_CURVE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "crux/core/base/status.h"

namespace crux::protocol {

inline constexpr size_t kZ85KeyLength = 40;

struct CurveKeyPair {
  std::string public_z85;  // 40 Z85 chars.
  std::string secret_z85;  // 40 Z85 chars. Empty in a key pair loaded from a .pub file.
};

enum class KeyRole { kJob, kSwitch, kHost };

struct AuthorizedKey {
  std::string name;  // File stem ("job-a" for job-a.pub, "tor0" for switches/tor0.pub, "host3"
                     // for hosts/host3.pub).
  std::string public_z85;  // 40 Z85 chars.
  KeyRole role = KeyRole::kJob;
  std::string switch_name;  // kSwitch: the switch the key speaks for (= name).
  std::string path;         // The file it came from.
  std::string host_name;    // kHost: the host the key speaks for (= name).

  friend bool operator==(const AuthorizedKey&, const AuthorizedKey&) = default;
};

// What each authorised key may do, by public key (Z85).
struct KeyGrant {
  KeyRole role = KeyRole::kJob;
  std::string name;                   // For logs: the first file's stem.
  std::vector<std::string> switches;  // kSwitch: sorted switch names.
  std::vector<std::string> hosts;     // kHost: sorted host names.

  friend bool operator==(const KeyGrant&, const KeyGrant&) = default;
};
using KeyGrants = std::map<std::string, KeyGrant>;

// True when `key` is 40 chars of the Z85 alphabet and decodes to 32 bytes.
bool IsValidZ85Key(std::string_view key);

// A fresh key pair from libzmq (libsodium). Fails (kUnavailable) if libzmq lacks CURVE.
core::Result<CurveKeyPair> GenerateCurveKeyPair();

// Public key of a Z85 secret key.
core::Result<std::string> DerivePublicKey(std::string_view secret_z85);

// Writes `<base>.key` (public + secret, created 0600, never group/world readable even
// transiently) and `<base>.pub` (public only, 0644). Fails with kAlreadyExists if either file
// exists and `overwrite` is false. `base` is a path without extension, e.g. "/etc/cruxd/server".
core::Status SaveKeyPair(const CurveKeyPair& keys, const std::string& base, bool overwrite = false);

// Writes only `<path>` as a public key file (0644).
core::Status SavePublicKey(std::string_view public_z85, const std::string& path,
                           bool overwrite = false);

// Reads a secret key file (`<base>.key`). Refuses files with group/other permission bits
// (kFailedPrecondition) and mismatching public/secret keys (kInvalidArgument).
core::Result<CurveKeyPair> LoadSecretKeyFile(const std::string& path);

// Reads a public key file (a `.pub` file, or a `.key` file whose public key is used).
core::Result<std::string> LoadPublicKeyFile(const std::string& path);

// Every `*.pub` file in `dir` (job keys), in `dir/switches` (switch keys) and in `dir/hosts` (host
// keys), sorted by role (job, switch, host) then name. A bad file is an error naming it; an empty
// directory is not an error (returns no keys: nobody is authorised).
core::Result<std::vector<AuthorizedKey>> LoadAuthorizedKeys(const std::string& dir);

// The grants of `keys` (LoadAuthorizedKeys). Errors: kInvalidArgument when one key has two roles
// (e.g. a job key and a host key), naming both files.
core::Result<KeyGrants> GrantsOf(const std::vector<AuthorizedKey>& keys);

}  // namespace crux::protocol

#endif  // CRUX_PROTOCOL_CURVE_H_
