#define _GNU_SOURCE
#include "CDaemon.h"
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

int bd_spawn(pid_t *pid, int *pidfd, const char *path, char *const argv[], char *const envp[], int out_fd, int err_fd, int search_path) {
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc) return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc) { posix_spawn_file_actions_destroy(&fa); return rc; }
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    rc = search_path ? posix_spawnp(pid, path, &fa, &attr, argv, envp) : posix_spawn(pid, path, &fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    *pidfd = -1;
    if (rc) return rc;
    int fd = (int)syscall(SYS_pidfd_open, *pid, 0);
    if (fd < 0) {
        *pidfd = -errno;
        kill(-*pid, SIGKILL);
        while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR) {}
        return 0;
    }
    *pidfd = fd;
    return 0;
}

int bd_notify(const char *socket_path, const char *text, unsigned long length) {
    struct sockaddr_un sa;
    size_t n = strlen(socket_path);
    if (n == 0 || n >= sizeof(sa.sun_path)) return EINVAL;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, socket_path, n);
    if (sa.sun_path[0] == '@') sa.sun_path[0] = 0;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    ssize_t r = sendto(fd, text, length, MSG_NOSIGNAL, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
    int e = r < 0 ? errno : 0;
    close(fd);
    return e;
}

int bd_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    /* Only the daemon's read end is non-blocking: the child's stdout and
       stderr stay ordinary blocking pipes (a child told EAGAIN on a full
       pipe would fail with "write error"). */
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        errno = e;
        return -1;
    }
    return 0;
}

/* `path` as a Unix socket address; -ENAMETOOLONG when it does not fit. */
static int unix_address(const char *path, struct sockaddr_un *a) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path) return -ENAMETOOLONG;
    strcpy(a->sun_path, path);
    return 0;
}

int bd_unix_listen(const char *path, int backlog) {
    struct sockaddr_un a;
    if (unix_address(path, &a) != 0) return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, backlog) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int bd_unix_connect(const char *path) {
    struct sockaddr_un a;
    if (unix_address(path, &a) != 0) return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS && errno != EAGAIN) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int bd_unix_accept(int fd) {
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    return c < 0 ? -errno : c;
}

int bd_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred c;
    socklen_t n = sizeof c;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &n) != 0) return errno;
    *pid = c.pid;
    *uid = c.uid;
    *gid = c.gid;
    return 0;
}

int bd_thread_timedjoin(pthread_t thread, int ms) {
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) { end.tv_sec += 1; end.tv_nsec -= 1000000000L; }
    return pthread_timedjoin_np(thread, NULL, &end);
}
