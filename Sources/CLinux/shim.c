// Thin pass-throughs to Linux syscalls; see CLinux.h for why they exist.
#define _GNU_SOURCE
#include "CLinux.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <linux/capability.h>
#include <sched.h>

// The loop's own system calls on its hot path (the wait, and the wake-up
// and timer counters) go to the kernel directly. Through glibc, read, write
// and epoll_wait are cancellation points: in a process with threads each
// call switches asynchronous cancellation on and off around the system call
// (about 60 instructions, more than the rest of the wrapper), and syscall()
// itself is a variadic call that shuffles every argument. The engine's
// threads are never cancelled (pthread_cancel would unwind through Swift
// frames, which Swift does not support), so on x86_64 and arm64 these are
// the system call instruction itself, as musl issues it; elsewhere
// syscall(). Under ThreadSanitizer the glibc calls stay: it sees the
// eventfds' hand-offs through its interceptors.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BL_LIBC_IO 1
#endif
#endif

#if !defined(BL_LIBC_IO) && (defined(__x86_64__) || defined(__aarch64__))
/// The kernel returns -errno; callers expect -1 and errno, as from libc.
static inline long bl_syscall_result(long ret) {
    if ((unsigned long)ret > -4096UL) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

static inline long bl_raw_syscall(long n, long a, long b, long c, long d, long e, long f) {
    long ret;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
#else
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory", "cc");
    ret = x0;
#endif
    return bl_syscall_result(ret);
}
#define BL_SYSCALL(n, a, b, c, d, e, f) bl_raw_syscall((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

static inline long bl_raw_syscall3(long n, long a, long b, long c) {
    long ret;
#if defined(__x86_64__)
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#else
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory", "cc");
    ret = x0;
#endif
    return bl_syscall_result(ret);
}
#define BL_SYSCALL3(n, a, b, c) bl_raw_syscall3((n), (long)(a), (long)(b), (long)(c))
#elif !defined(BL_LIBC_IO)
#define BL_SYSCALL(n, a, b, c, d, e, f) syscall((n), (a), (b), (c), (d), (e), (f))
#define BL_SYSCALL3(n, a, b, c) syscall((n), (a), (b), (c))
#endif

static inline ssize_t bl_read(int fd, void *buf, size_t n) {
#ifdef BL_LIBC_IO
    return read(fd, buf, n);
#else
    return BL_SYSCALL3(SYS_read, fd, buf, n);
#endif
}

static inline ssize_t bl_write(int fd, const void *buf, size_t n) {
#ifdef BL_LIBC_IO
    return write(fd, buf, n);
#else
    return BL_SYSCALL3(SYS_write, fd, buf, n);
#endif
}

int bl_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int bl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

size_t bl_epoll_event_size(void) { return sizeof(struct epoll_event); }

int bl_epoll_wait(int epfd, void *events, int max, int timeout_ms) {
#ifdef BL_LIBC_IO
    return epoll_wait(epfd, (struct epoll_event *)events, max, timeout_ms);
#else
    // epoll_pwait with no signal mask is epoll_wait (arm64 has only the former).
    return (int)BL_SYSCALL(SYS_epoll_pwait, epfd, events, max, timeout_ms, NULL, _NSIG / 8);
#endif
}

_Static_assert(sizeof(bl_epoll_event) == sizeof(struct epoll_event), "bl_epoll_event mirrors struct epoll_event");
_Static_assert(offsetof(bl_epoll_event, events) == offsetof(struct epoll_event, events), "bl_epoll_event.events");
_Static_assert(offsetof(bl_epoll_event, data) == offsetof(struct epoll_event, data), "bl_epoll_event.data");

int bl_eventfd(unsigned int initval, int semaphore) {
    return eventfd(initval, EFD_NONBLOCK | EFD_CLOEXEC | (semaphore ? EFD_SEMAPHORE : 0));
}

int bl_eventfd_write(int fd, uint64_t value) {
    ssize_t n = bl_write(fd, &value, sizeof value);
    return n == (ssize_t)sizeof value ? 0 : -1;
}

int bl_eventfd_read(int fd, uint64_t *value) {
    ssize_t n = bl_read(fd, value, sizeof *value);
    return n == (ssize_t)sizeof *value ? 0 : -1;
}

int bl_timerfd_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

int bl_timerfd_arm_abs(int fd, uint64_t deadline_ns, uint64_t interval_ns) {
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000ull);
    its.it_value.tv_nsec = (long)(deadline_ns % 1000000000ull);
    if (deadline_ns != 0) {
        its.it_interval.tv_sec = (time_t)(interval_ns / 1000000000ull);
        its.it_interval.tv_nsec = (long)(interval_ns % 1000000000ull);
    }
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL);
}

int bl_timerfd_read(int fd, uint64_t *expirations) {
    ssize_t n = bl_read(fd, expirations, sizeof *expirations);
    return n == (ssize_t)sizeof *expirations ? 0 : -1;
}

static void fill_set(sigset_t *set, const int *signals, int count) {
    sigemptyset(set);
    for (int i = 0; i < count; i++) sigaddset(set, signals[i]);
}

int bl_signalfd_create(const int *signals, int count) {
    sigset_t set;
    fill_set(&set, signals, count);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int bl_signalfd_read(int fd, bl_siginfo *out, int max) {
    struct signalfd_siginfo buf[16];
    if (max > 16) max = 16;
    ssize_t n = read(fd, buf, sizeof(struct signalfd_siginfo) * (size_t)max);
    if (n < 0) return -1;
    int count = (int)(n / (ssize_t)sizeof(struct signalfd_siginfo));
    for (int i = 0; i < count; i++) {
        out[i].signo = buf[i].ssi_signo;
        out[i].code = buf[i].ssi_code;
        out[i].pid = buf[i].ssi_pid;
        out[i].uid = buf[i].ssi_uid;
        out[i].int_value = buf[i].ssi_int;
        out[i].ptr_value = buf[i].ssi_ptr;
        out[i].status = buf[i].ssi_status;
        out[i].overrun = buf[i].ssi_overrun;
    }
    return count;
}

int bl_block_signals(const int *signals, int count) {
    sigset_t set;
    fill_set(&set, signals, count);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0) { errno = rc; return -1; }
    return 0;
}

int bl_unblock_signals(const int *signals, int count) {
    sigset_t set;
    fill_set(&set, signals, count);
    int rc = pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    if (rc != 0) { errno = rc; return -1; }
    return 0;
}

int bl_signal_is_blocked(int signo) {
    sigset_t cur;
    int rc = pthread_sigmask(SIG_BLOCK, NULL, &cur);
    if (rc != 0) { errno = rc; return -1; }
    return sigismember(&cur, signo);
}

int bl_sigqueue(pid_t pid, int signo, int value) {
    union sigval v;
    memset(&v, 0, sizeof v);
    v.sival_int = value;
    return sigqueue(pid, signo, v);
}

int bl_tgkill(pid_t tid, int signo) { return (int)syscall(SYS_tgkill, getpid(), tid, signo); }
int bl_sigrtmin(void) { return SIGRTMIN; }
int bl_sigrtmax(void) { return SIGRTMAX; }

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

// pidfd_open makes the fd close-on-exec. Without PIDFD_NONBLOCK on
// purpose: waitid on a non-blocking pidfd never waits.
int bl_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int bl_pidfd_send_signal(int pidfd, int signo) { return (int)syscall(SYS_pidfd_send_signal, pidfd, signo, NULL, 0); }

int bl_kill_group(pid_t pgid, int signo) { return kill(-pgid, signo); }

int bl_pidfd_reap(int pidfd, pid_t pid, int nohang, int *code, int *status) {
    siginfo_t si;
    int flags = WEXITED | (nohang ? WNOHANG : 0);
    int rc;
    for (;;) {
        memset(&si, 0, sizeof si);
        rc = waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, flags);
        if (rc != 0 && errno == EINVAL) rc = waitid(P_PID, (id_t)pid, &si, flags);
        if (rc == 0 || errno != EINTR) break;
    }
    if (rc != 0) return -1;
    if (si.si_pid == 0) return 0;  // WNOHANG: not exited yet
    *code = si.si_code;
    *status = si.si_status;
    return 1;
}

int bl_pidfds_wait(const int *fds, int count, int timeout_ms) {
    struct pollfd small[16];
    struct pollfd *p = small;
    if (count < 0) {
        errno = EINVAL;
        return -1;
    }
    if (count > 16 && !(p = malloc(sizeof *p * (size_t)count))) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < count; i++) {
        p[i].fd = fds[i];
        p[i].events = POLLIN;
        p[i].revents = 0;
    }
    int rc;
    do rc = poll(p, (nfds_t)count, timeout_ms);
    while (rc < 0 && errno == EINTR);
    int e = errno;
    if (p != small) free(p);
    errno = e;
    return rc;
}

int bl_futex_wait(uint32_t *addr, uint32_t expected, int64_t timeout_ns) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ll);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ll);
        tsp = &ts;
    }
    return (int)syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
}

int bl_futex_wake(uint32_t *addr, int count) {
    return (int)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

/// A spin-wait hint to the CPU (x86 pause, arm yield).
static inline void bl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ volatile("yield");
#endif
}

void bl_lock_wait(uint32_t *word) {
    // Held: spin a little first, as the holder keeps the lock for a few
    // dozen instructions, unless sleepers are already queued.
    for (int spin = 0; spin < 100; spin++) {
        uint32_t state = __atomic_load_n(word, __ATOMIC_RELAXED);
        if (state == 0) {
            uint32_t expected = 0;
            if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        } else if (state == 2) {
            break;
        }
        bl_cpu_relax();
    }
    // Mark the lock contended (2) as we take or wait for it: the unlock
    // that follows wakes a sleeper.
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        bl_futex_wait(word, 2, -1);
    }
}

void bl_lock_wake(uint32_t *word) { bl_futex_wake(word, 1); }

pid_t bl_gettid(void) { return (pid_t)syscall(SYS_gettid); }

static __thread pid_t cached_tid;
pid_t bl_cached_tid(void) {
    if (cached_tid == 0) cached_tid = bl_gettid();
    return cached_tid;
}

// After fork() the child's one thread is a new kernel thread, but its copy
// of the cache still holds the parent thread's id: the child would pass
// every loop's owner check and, through the epoll sets it shares with the
// parent, take the parent's sources off them. The child handler only
// forgets the cache (a store to the calling thread's own variable: what a
// handler of a fork in a threaded process may do), so the next call asks
// the kernel. Registered once, when the library is loaded.
static void bl_forget_tid_after_fork(void) { cached_tid = 0; }
__attribute__((constructor)) static void bl_register_fork_handler(void) {
    (void)pthread_atfork(NULL, NULL, bl_forget_tid_after_fork);
}
pid_t bl_main_tid(void) { return getpid(); }

int bl_set_thread_name(const char *name) {
    char buf[16];
    strncpy(buf, name, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    int rc = pthread_setname_np(pthread_self(), buf);
    if (rc != 0) { errno = rc; return -1; }
    return 0;
}

int bl_set_timer_slack(unsigned long ns) { return prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0); }
long bl_get_timer_slack(void) { return prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0); }

int bl_set_affinity(const int *cpus, int count) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < count; i++) CPU_SET(cpus[i], &set);
    return sched_setaffinity(0, sizeof set, &set);
}

int bl_get_scheduling(int *policy, int *priority) {
    struct sched_param p;
    int rc = pthread_getschedparam(pthread_self(), policy, &p);
    if (rc != 0) return rc;
    *priority = p.sched_priority;
    return 0;
}

int bl_current_cpu(void) { return sched_getcpu(); }

int bl_set_fifo_priority(int priority) {
    struct sched_param p;
    memset(&p, 0, sizeof p);
    p.sched_priority = priority;
    int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
    if (rc != 0) { errno = rc; return -1; }
    return 0;
}

int bl_tgsigqueue(pid_t tid, int signo, int value) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = signo;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = value;
    return (int)syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, signo, &info);
}

int bl_get_affinity(bl_cpuset *out) {
    _Static_assert(sizeof(cpu_set_t) <= sizeof(bl_cpuset), "cpu_set_t size");
    return sched_getaffinity(0, sizeof(cpu_set_t), (cpu_set_t *)out->bytes);
}

int bl_restore_affinity(const bl_cpuset *set) {
    return sched_setaffinity(0, sizeof(cpu_set_t), (const cpu_set_t *)set->bytes);
}

int bl_cpu_count(void) { return (int)sysconf(_SC_NPROCESSORS_CONF); }

int bl_drop_effective_capability(int cap) {
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (syscall(SYS_capget, &h, d) != 0) return -1;
    d[cap / 32].effective &= ~(1u << (cap % 32));
    return (int)syscall(SYS_capset, &h, d);
}

int bl_get_thread_name(char *buf) { return prctl(PR_GET_NAME, buf, 0, 0, 0); }

int bl_dup_cloexec(int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 0); }

int bl_file_identity(int fd, uint64_t *dev, uint64_t *ino) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    *dev = (uint64_t)st.st_dev;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int bl_fd_is_closed(int fd) { return fcntl(fd, F_GETFD) == -1 && errno == EBADF; }
