#ifndef BOARDD_CDAEMON_H
#define BOARDD_CDAEMON_H
#include <pthread.h>
#include <sys/types.h>

/// posix_spawn(3)/posix_spawnp with stdin from /dev/null, stdout and stderr
/// onto the given fds, every signal unblocked and at its default action
/// (the daemon blocks the signals it reads through signalfd, and a child
/// would inherit that mask), in a new process group; then the child's
/// pidfd (pidfd_open, Linux 5.3+, close-on-exec) into `*pidfd`, which the
/// caller owns. Returns 0 or posix_spawn's errno. When the child ran but
/// pidfd_open failed, returns 0 with `*pidfd` set to -errno: the child's
/// group was killed and the child reaped, so no child ever runs unwatched.
int bd_spawn(pid_t *pid, int *pidfd, const char *path, char *const argv[], char *const envp[], int out_fd, int err_fd, int search_path);

/// Sends the notify datagram `text` to `socket_path` ('@' = abstract
/// namespace), as sd_notify does. Returns 0 or an errno.
int bd_notify(const char *socket_path, const char *text, unsigned long length);
/// pipe2(fds, O_CLOEXEC), then O_NONBLOCK on the read end fds[0] only:
/// the write end fds[1] is the child's stdout or stderr and stays blocking.
/// Returns 0 or -1 with errno set (no fd left open).
int bd_pipe(int fds[2]);

/// A listening AF_UNIX stream socket bound to `path` (non-blocking,
/// close-on-exec). Returns the fd, or -errno (no fd left open).
int bd_unix_listen(const char *path, int backlog);
/// Connects to the AF_UNIX stream socket at `path` without blocking, to
/// see whether a daemon answers there. Returns the connected fd (the
/// caller closes it), or -errno (ECONNREFUSED: nothing listens; ENOENT:
/// no such file).
int bd_unix_connect(const char *path);
/// accept4(fd) non-blocking and close-on-exec. Returns the fd or -errno.
int bd_unix_accept(int fd);
/// The peer's pid, uid and gid (SO_PEERCRED). Returns 0 or an errno.
int bd_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// pthread_timedjoin_np: joins `thread` if it ends within `ms`
/// milliseconds. Returns 0 (joined) or an errno (ETIMEDOUT).
int bd_thread_timedjoin(pthread_t thread, int ms);
#endif
