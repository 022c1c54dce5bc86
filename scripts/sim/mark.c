/*
 * mark: executes the marker instruction `xchg %bx, %bx` once, so that the
 * guest-insns plugin (scripts/sim/guest-insns.c) prints its totals; with
 * an argument, prints "mark N: LABEL" first, N counting this guest's marks
 * (kept in /tmp/mark.count), so the plugin's Nth line can be named.
 * A no-op anywhere else (the instruction swaps a register with itself).
 * Build: cc -O2 -static -o mark mark.c
 */
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc > 1) {
        int n = 0;
        FILE *f = fopen("/tmp/mark.count", "r");
        if (f) {
            if (fscanf(f, "%d", &n) != 1)
                n = 0;
            fclose(f);
        }
        n++;
        f = fopen("/tmp/mark.count", "w");
        if (f) {
            fprintf(f, "%d\n", n);
            fclose(f);
        }
        printf("mark %d: %s\n", n, argv[1]);
        fflush(stdout);
    }
    __asm__ volatile("xchg %%bx, %%bx" ::: "memory");
    return 0;
}
