// CLinux: the few Linux primitives boardloop's engine needs that Glibc does not
// expose to Swift on this toolchain (epoll, eventfd, timerfd, signalfd, futex,
// gettid, thread naming, timer slack), as plain C functions with plain C types.
//
// Why a shim and not Glibc: `import Glibc` does not bring in <sys/epoll.h> and
// friends, `struct epoll_event` is packed on x86_64 (awkward from Swift), and
// syscall()/prctl() are variadic. Everything here is a thin pass-through: it
// returns what the kernel returned and leaves errno as the kernel set it.
#ifndef BOARDLOOP_CLINUX_H
#define BOARDLOOP_CLINUX_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <signal.h>
#include <time.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- epoll --------------------------------------------------------------
// Interest / readiness bits, as plain constants (glibc declares them as an enum).
static const uint32_t BL_EPOLLIN = 0x001;
static const uint32_t BL_EPOLLPRI = 0x002;
static const uint32_t BL_EPOLLOUT = 0x004;
static const uint32_t BL_EPOLLERR = 0x008;
static const uint32_t BL_EPOLLHUP = 0x010;
static const uint32_t BL_EPOLLRDHUP = 0x2000;
static const uint32_t BL_EPOLLET = 1u << 31;

/// A port source's events (readable 1, writable 2, error 4, hangup 8) from
/// epoll's bits: readable is IN or PRI, writable OUT, error ERR, hangup HUP
/// or RDHUP. One table load for the low five bits, one shift for RDHUP.
static inline uint32_t bl_port_events(uint32_t epoll_bits) {
    static const uint8_t low[32] = {
        0, 1, 1, 1, 2, 3, 3, 3, 4, 5, 5, 5, 6, 7, 7, 7,
        8, 9, 9, 9, 10, 11, 11, 11, 12, 13, 13, 13, 14, 15, 15, 15,
    };
    return low[epoll_bits & 31] | ((epoll_bits >> 10) & 8);
}

static const int BL_EPOLL_CTL_ADD = 1;
static const int BL_EPOLL_CTL_DEL = 2;
static const int BL_EPOLL_CTL_MOD = 3;

/// epoll_create1(EPOLL_CLOEXEC).
int bl_epoll_create(void);
/// epoll_ctl with the event packed from `events` and `data`.
int bl_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
/// Size in bytes of one kernel `struct epoll_event` (packed on x86_64).
size_t bl_epoll_event_size(void);
/// epoll_wait into a caller-owned buffer of `max` kernel events.
int bl_epoll_wait(int epfd, void *events, int max, int timeout_ms);

/// The kernel's `struct epoll_event`, mirrored (packed on x86_64, as glibc
/// declares it; shim.c checks the layout against <sys/epoll.h>), so the
/// loop below that collects the ready ports is inline.
typedef struct
#if defined(__x86_64__)
__attribute__((packed))
#endif
{
    uint32_t events;
    uint64_t data;
} bl_epoll_event;

/// A port on a run loop's ready list: its token and its epoll bits.
typedef struct {
    uint64_t token;
    uint32_t events;
} bl_ready_port;

/// Copies the first `n` events of a buffer filled by bl_epoll_wait whose
/// data has none of the bits of `tag_mask` (ports) to `out`, in order, and
/// ORs the tags of the others into `*tags`; returns how many it copied.
/// Here rather than in Swift: every ready port passes through this loop,
/// and C keeps it to a few instructions an event.
static inline int bl_epoll_collect_ports(const void *events, int n, bl_ready_port *out,
                                         uint64_t tag_mask, uint64_t *tags) {
    const bl_epoll_event *e = (const bl_epoll_event *)events;
    const bl_epoll_event *end = e + n;
    bl_ready_port *o = out;
    uint64_t seen = 0;
    for (; e < end; e++) {
        uint64_t data = e->data;
        uint64_t tag = data & tag_mask;
        if (tag == 0) {
            o->token = data;
            o->events = e->events;
            o++;
        } else {
            seen |= tag;
        }
    }
    *tags = seen;
    return (int)(o - out);
}

// ---- eventfd ------------------------------------------------------------
/// eventfd(initval, EFD_NONBLOCK | EFD_CLOEXEC [| EFD_SEMAPHORE]).
int bl_eventfd(unsigned int initval, int semaphore);
/// Adds `value` to the counter (write(2) of 8 bytes). Returns 0 or -1/errno.
int bl_eventfd_write(int fd, uint64_t value);
/// Reads and resets the counter (read(2) of 8 bytes). Returns 0, or -1/errno
/// (EAGAIN when the counter was already zero).
int bl_eventfd_read(int fd, uint64_t *value);

// ---- timerfd ------------------------------------------------------------
/// timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC).
int bl_timerfd_create(void);
/// Arms the timer to fire at the absolute CLOCK_MONOTONIC time
/// `deadline_ns` (TFD_TIMER_ABSTIME), then every `interval_ns` after it on
/// that grid (0: once); `deadline_ns == 0` disarms it.
int bl_timerfd_arm_abs(int fd, uint64_t deadline_ns, uint64_t interval_ns);
/// Reads the expiration count (clears readiness). -1/EAGAIN if none.
int bl_timerfd_read(int fd, uint64_t *expirations);

// ---- copies ---------------------------------------------------------------
/// Copies `n` bytes; up to 16 (a small message's payload) in line, with two
/// possibly overlapping loads and stores, larger ones by memcpy. The
/// buffers must not overlap.
static inline void bl_copy_bytes(void *dst, const void *src, size_t n) {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        __builtin_memcpy(&a, s, 8);
        __builtin_memcpy(&b, s + n - 8, 8);
        __builtin_memcpy(d, &a, 8);
        __builtin_memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        __builtin_memcpy(&a, s, 4);
        __builtin_memcpy(&b, s + n - 4, 4);
        __builtin_memcpy(d, &a, 4);
        __builtin_memcpy(d + n - 4, &b, 4);
    } else if (n < 4) {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    } else {
        __builtin_memcpy(d, s, n);
    }
}

// ---- time ---------------------------------------------------------------
/// CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall on x86_64/arm64);
/// inline, as the loop reads it on its hot path.
static inline uint64_t bl_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// ---- signalfd -----------------------------------------------------------
/// The fields of a `struct signalfd_siginfo` that boardloop reports.
typedef struct {
    uint32_t signo;
    int32_t code;
    uint32_t pid;
    uint32_t uid;
    int32_t int_value;   // ssi_int: sigqueue()'s sival_int
    uint64_t ptr_value;  // ssi_ptr: sigqueue()'s sival_ptr
    int32_t status;
    uint32_t overrun;
} bl_siginfo;

/// Creates a signalfd (SFD_NONBLOCK | SFD_CLOEXEC) for the given signal numbers.
int bl_signalfd_create(const int *signals, int count);
/// Reads up to `max` siginfos. Returns the count, or -1/errno (EAGAIN when none).
int bl_signalfd_read(int fd, bl_siginfo *out, int max);
/// Blocks `signals` in the calling thread (pthread_sigmask SIG_BLOCK).
int bl_block_signals(const int *signals, int count);
/// Unblocks `signals` in the calling thread (pthread_sigmask SIG_UNBLOCK).
int bl_unblock_signals(const int *signals, int count);
/// 1 when `signo` is blocked in the calling thread, 0 when not, -1/errno.
int bl_signal_is_blocked(int signo);
/// sigqueue(pid, signo, {.sival_int = value}).
int bl_sigqueue(pid_t pid, int signo, int value);
/// tgkill(getpid(), tid, signo): a signal aimed at one thread.
int bl_tgkill(pid_t tid, int signo);
/// rt_tgsigqueueinfo: a queued signal with a value aimed at one thread of this
/// process (si_code SI_QUEUE, sender pid/uid = ours).
int bl_tgsigqueue(pid_t tid, int signo, int value);
/// SIGRTMIN / SIGRTMAX (glibc makes them function calls).
int bl_sigrtmin(void);
int bl_sigrtmax(void);

// ---- child processes (pidfd) ---------------------------------------------
/// pidfd_open(pid, 0) (Linux 5.3+): a close-on-exec fd that becomes
/// readable when the process exits. -1/errno.
int bl_pidfd_open(pid_t pid);
/// pidfd_send_signal(pidfd, signo, NULL, 0) (Linux 5.1+). 0 or -1/errno.
int bl_pidfd_send_signal(int pidfd, int signo);
/// kill(-pgid, signo): a signal to every process of a group. 0 or -1/errno.
int bl_kill_group(pid_t pgid, int signo);
/// waitid(P_PIDFD, pidfd, WEXITED [| WNOHANG]) (Linux 5.4+; on an older
/// kernel, which refuses P_PIDFD with EINVAL, waitid(P_PID, pid, ...)).
/// Returns 1 and sets `*code` (CLD_EXITED, CLD_KILLED, CLD_DUMPED) and
/// `*status` (the exit status or the signal) when the child was reaped, 0
/// when it has not exited (nohang), -1/errno otherwise. EINTR is retried.
int bl_pidfd_reap(int pidfd, pid_t pid, int nohang, int *code, int *status);
/// poll(2) for readability on `count` pidfds, at most `timeout_ms` (-1:
/// forever). Returns how many are readable (0 on timeout), or -1/errno.
int bl_pidfds_wait(const int *fds, int count, int timeout_ms);
static const int BL_CLD_EXITED = 1;
static const int BL_CLD_KILLED = 2;
static const int BL_CLD_DUMPED = 3;

// ---- futex (for wait-until-done) ---------------------------------------
/// Waits while *addr == expected, at most timeout_ns (-1 = forever).
/// Returns 0 (woken or value changed), or -1/errno (ETIMEDOUT, EINTR, EAGAIN).
int bl_futex_wait(uint32_t *addr, uint32_t expected, int64_t timeout_ns);
/// Wakes up to `count` waiters on addr.
int bl_futex_wake(uint32_t *addr, int count);

// ---- a mutex on one futex word ------------------------------------------
// 0 free, 1 held, 2 held with (maybe) sleepers: Drepper's "Futexes Are
// Tricky" mutex, as Rust's standard library and musl lock. Uncontended, a
// lock is one compare-and-swap and an unlock one exchange, inline; a
// pthread mutex is two calls of about 25 instructions each.
/// Takes the lock, sleeping while another thread holds it (bl_lock_wait).
void bl_lock_wait(uint32_t *word);
/// Wakes one thread sleeping in bl_lock_wait.
void bl_lock_wake(uint32_t *word);
static inline void bl_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (!__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) bl_lock_wait(word);
}
static inline void bl_unlock(uint32_t *word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) bl_lock_wake(word);
}

// ---- 32/64-bit atomics on raw memory (C11, sequentially consistent) -----
// Inline: the perform queue reads and writes its slots' state words on
// every post, take and run.
static inline uint32_t bl_atomic_load_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void bl_atomic_store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
/// Compare-and-swap; returns 1 on success (and *p == desired), 0 otherwise.
static inline int bl_atomic_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
static inline uint32_t bl_atomic_exchange_u32(uint32_t *p, uint32_t v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t bl_atomic_fetch_add_u32(uint32_t *p, uint32_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline uint64_t bl_atomic_load_u64(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void bl_atomic_store_u64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline int bl_atomic_cas_u64(uint64_t *p, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}
static inline uint64_t bl_atomic_fetch_add_u64(uint64_t *p, uint64_t v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

// ---- threads ------------------------------------------------------------
/// gettid(2).
pid_t bl_gettid(void);
/// gettid(2), cached per thread after the first call (no syscall after that);
/// a fork() child forgets the cache (its thread has a new id).
pid_t bl_cached_tid(void);
/// The main thread's id (the process id).
pid_t bl_main_tid(void);
/// pthread_setname_np on the calling thread (name truncated to 15 bytes).
int bl_set_thread_name(const char *name);
/// prctl(PR_SET_TIMERSLACK, ns) on the calling thread.
int bl_set_timer_slack(unsigned long ns);
/// prctl(PR_GET_TIMERSLACK) for the calling thread.
long bl_get_timer_slack(void);
/// sched_setaffinity(0, ...) on the calling thread with the given CPUs.
int bl_set_affinity(const int *cpus, int count);
/// pthread_setschedparam(self, SCHED_FIFO, priority).
int bl_set_fifo_priority(int priority);
/// pthread_getschedparam(self): the policy and real-time priority; 0 or an errno.
int bl_get_scheduling(int *policy, int *priority);
/// sched_getcpu(): the CPU the calling thread runs on now, or -1.
int bl_current_cpu(void);
/// A saved CPU affinity mask (cpu_set_t).
typedef struct { unsigned char bytes[128]; } bl_cpuset;
/// sched_getaffinity(0) into `out`.
int bl_get_affinity(bl_cpuset *out);
/// sched_setaffinity(0) from a saved mask.
int bl_restore_affinity(const bl_cpuset *set);
/// Number of CPUs configured (sysconf(_SC_NPROCESSORS_CONF)).
int bl_cpu_count(void);
/// Drops capability `cap` from the calling thread's effective set (capset).
/// For tests of permission errors when running as root.
int bl_drop_effective_capability(int cap);
/// The calling thread's name (prctl PR_GET_NAME) into buf (>= 16 bytes).
int bl_get_thread_name(char *buf);
/// fcntl(fd, F_DUPFD_CLOEXEC, 0): a close-on-exec duplicate, or -1 and errno.
int bl_dup_cloexec(int fd);
/// fstat(fd): the device and inode of the open file, 0 on success, or -1 and errno.
int bl_file_identity(int fd, uint64_t *dev, uint64_t *ino);
/// 1 if fd is not an open descriptor (fcntl(F_GETFD) fails with EBADF), else 0.
int bl_fd_is_closed(int fd);
/// Whether the calling thread's errno is EBADF, and setting it to 0: the
/// loop checks once per wait whether a handler read a closed fd.
static inline int bl_errno_is_ebadf(void) { return errno == EBADF; }
static inline void bl_errno_clear(void) { errno = 0; }

#ifdef __cplusplus
}
#endif

#endif
