/* Prints the host's TSC frequency in kHz, measured against
 * CLOCK_MONOTONIC_RAW over 200 ms. Under TCG, qemu's guest TSC counts at the
 * host's TSC rate, so this is the guest's too: run-guest.sh passes it as
 * tsc_early_khz= and the guest kernel skips its PIT calibration, which
 * fails under emulation often enough to leave the guest on jiffies. */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

/* A TSC reading and the clock at the same moment: the tightest of a few
 * brackets (a preempted one is wide). */
static void sample(unsigned long long *tsc, long long *ns)
{
    unsigned long long best = ~0ULL;
    for (int i = 0; i < 20; i++) {
        struct timespec ts;
        unsigned long long a = __rdtsc();
        clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
        unsigned long long b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        }
    }
}

int main(void)
{
    unsigned long long t0, t1;
    long long n0, n1;
    sample(&t0, &n0);
    struct timespec d = { 0, 200000000L };
    nanosleep(&d, NULL);
    sample(&t1, &n1);
    if (n1 <= n0 || t1 <= t0) return 1;
    printf("%llu\n", (t1 - t0) * 1000000ULL / (unsigned long long)(n1 - n0));
    return 0;
}
