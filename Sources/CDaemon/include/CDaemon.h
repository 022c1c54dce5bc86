#ifndef BOARDD_CDAEMON_H
#define BOARDD_CDAEMON_H
#include <sys/types.h>

/// pidfd_open(2): an fd that becomes readable when the process exits (Linux 5.3+).
/// Returns -1 with errno set.
int bd_pidfd_open(pid_t pid);

/// posix_spawn(3)/posix_spawnp with stdin from /dev/null, stdout and stderr
/// onto the given fds, every signal unblocked and at its default action
/// (the daemon blocks the signals it reads through signalfd, and a child
/// would inherit that mask), in a new process group. Returns 0 or an errno.
int bd_spawn(pid_t *pid, const char *path, char *const argv[], char *const envp[], int out_fd, int err_fd, int search_path);

/// Sends the notify datagram `text` to `socket_path` ('@' = abstract
/// namespace), as sd_notify does. Returns 0 or an errno.
int bd_notify(const char *socket_path, const char *text, unsigned long length);
/// pipe2(fds, O_CLOEXEC), then O_NONBLOCK on the read end fds[0] only:
/// the write end fds[1] is the child's stdout or stderr and stays blocking.
/// Returns 0 or -1 with errno set (no fd left open).
int bd_pipe(int fds[2]);
#endif
