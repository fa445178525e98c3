// Secret files: the private keys (--tls_key) and the coordinator's tokens file
// (--tokens_file) a daemon reads, and the throwaway ones `lockstep local` writes.
//
// CheckSecretFile is the rule both daemons apply before they use such a file (at start, and
// the coordinator again on every SIGHUP reload of its tokens): a secret may be read by its
// owner only. One exception, the one PostgreSQL makes for its ssl_key_file: a file owned by
// root may also be readable (never writable) by its group, because that is how an
// administrator hands a secret to a service whose user is not fixed (systemd's DynamicUser=
// with SupplementaryGroups=, a Kubernetes Secret volume with fsGroup); the deployments in
// deploy/ give such a group to one daemon alone. World access is never allowed. A file that
// breaks the rule is refused (the daemon exits with a bad-configuration status) rather
// than warned about: a key that others could read must be taken as already copied.
//
// WritePrivateFile writes a secret that nobody but this user may read (mode 0600 from the
// file's creation).
// Free functions without state: safe from any thread.
#ifndef LOCKSTEP_COMMON_SECRET_FILE_H_
#define LOCKSTEP_COMMON_SECRET_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// The rule on a file's owner and permission bits (st_uid, st_mode), without touching the
// file system: OK, or PERMISSION_DENIED "<flag>: <path> is readable by <whom> (mode 0644,
// owner uid 1000): ...; fix it with `chmod 600 <path>`". `flag` names the setting that
// named the file ("--tls_key", "--tokens_file").
absl::Status CheckSecretMode(const std::string& path, absl::string_view flag, uid_t owner,
                             mode_t mode);

// CheckSecretMode on the file `path` (links followed, as a Kubernetes Secret volume's are):
// NOT_FOUND when it cannot be stat()ed, else CheckSecretMode's answer.
absl::Status CheckSecretFile(const std::string& path, absl::string_view flag);

// Writes `contents` to `path` with mode 0600: a new file, private from its creation,
// renamed over whatever was there (so a reader sees the old or the new contents, and an
// old file's wider mode does not survive). INTERNAL naming the path on failure.
absl::Status WritePrivateFile(const std::string& path, absl::string_view contents);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SECRET_FILE_H_
