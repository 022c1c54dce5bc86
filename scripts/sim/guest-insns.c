/*
 * guest-insns: a qemu TCG plugin that counts what the whole guest executes
 * (instructions, and translation blocks entered, in three parts: the
 * kernel; user code below 256 MiB, where the static non-PIE programs run —
 * the initramfs's busybox, so the shell that drives a scenario, and the
 * marker; and user code above, where position-independent programs and
 * shared libraries run — boardd, react-ref and their libraries) and prints
 * the running totals each time the guest executes the marker instruction
 * `xchg %bx, %bx` in user space (scripts/sim/mark.c).
 * Two marks around a phase of a scenario give what the guest did in it,
 * every process and the kernel, exactly: scripts/bench-guest-reaction.sh
 * --profile divides them by the phase's edges.
 *
 * The plugin API is qemu's stable C ABI (plugin version 1, which Debian
 * 12's qemu 7.2 loads); the few declarations used are written out here,
 * since Debian ships no header for it. Output goes through qemu's log:
 * run qemu with -plugin PATH -d plugin -D FILE. Each mark prints a line
 *   guest-insns: mark N kernel K K-TB static S S-TB dynamic D D-TB pages P
 * with the totals since boot (K kernel instructions in K-TB blocks
 * entered, S in static programs in S-TB blocks, D in the rest of user
 * space in D-TB blocks; P: pages, below).
 *
 * Build: cc -O2 -shared -fPIC -o guest-insns.so guest-insns.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef struct {
    const char *target_name;
    struct { int min, cur; } version;
    bool system_emulation;
    union { struct { int smp_vcpus, max_vcpus; } system; };
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef uint32_t qemu_plugin_meminfo_t;
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_outs(const char *string);

PLUGIN_EXPORT int qemu_plugin_version = 1;

/* The guest has one CPU (-smp 1), so plain counters are exact. */
static uint64_t kernel_insns, kernel_tbs, static_insns, static_tbs, dynamic_insns, dynamic_tbs, marks;

/*
 * Pages: the distinct 4 KiB pages the position-independent code touches
 * (its code, and the data it reads and writes) between two runs of static
 * code, summed. In the reaction scenarios the driving shell runs between
 * every two edges, so each edge's reaction starts with the address space
 * switched: qemu's software TLB and its jump cache were flushed, and every
 * page the reaction touches costs a page-table walk in software, every
 * block a hash lookup. This is the figure that counts under TCG, where a
 * TLB miss costs far more than on hardware. A set with a generation: a
 * static block starts a new generation.
 */
#define PAGE_SLOTS 4096 /* power of two, far more than a reaction touches */
static uint64_t page_key[PAGE_SLOTS];
static uint32_t page_gen[PAGE_SLOTS];
static uint32_t generation = 1, generation_size;
static uint64_t pages;

static void touch(uint64_t vaddr)
{
    uint64_t page = vaddr >> 12;
    if (generation_size >= PAGE_SLOTS / 2)
        return; /* a burst bigger than any reaction: count no more of it */
    for (uint64_t i = (page * 0x9e3779b97f4a7c15ull) >> 52;; i = (i + 1) & (PAGE_SLOTS - 1)) {
        if (page_gen[i] != generation) {
            page_gen[i] = generation;
            page_key[i] = page;
            generation_size++;
            pages++;
            return;
        }
        if (page_key[i] == page)
            return;
    }
}

static void on_static_tb(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    (void)udata;
    if (generation_size) {
        generation++;
        generation_size = 0;
    }
}

static void on_dynamic_tb(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    touch((uint64_t)(uintptr_t)udata);
}

static void on_dynamic_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)vcpu;
    (void)info;
    (void)udata;
    touch(vaddr);
}

/* x86-64 kernel addresses have the top bit set; a static non-PIE program
 * is linked at 4 MiB, a PIE program at 0x55..., libraries at 0x7f.... */
static bool in_kernel(uint64_t vaddr) { return vaddr >> 63; }
static bool in_static(uint64_t vaddr) { return vaddr < (256u << 20); }

static void print_totals(const char *what)
{
    char line[200];
    snprintf(line, sizeof line,
             "guest-insns: %s %" PRIu64 " kernel %" PRIu64 " %" PRIu64 " static %" PRIu64 " %" PRIu64 " dynamic %" PRIu64 " %" PRIu64
             " pages %" PRIu64 "\n",
             what, marks, kernel_insns, kernel_tbs, static_insns, static_tbs, dynamic_insns, dynamic_tbs, pages);
    qemu_plugin_outs(line);
}

static void on_mark(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    (void)udata;
    marks++;
    print_totals("mark");
}

static void on_exit_cb(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    print_totals("exit");
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb);
    bool kernel = in_kernel(vaddr);
    uint64_t *insns = kernel ? &kernel_insns : in_static(vaddr) ? &static_insns : &dynamic_insns;
    uint64_t *tbs = kernel ? &kernel_tbs : in_static(vaddr) ? &static_tbs : &dynamic_tbs;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, insns, n);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, tbs, 1);
    if (kernel)
        return;
    if (in_static(vaddr)) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_static_tb, QEMU_PLUGIN_CB_NO_REGS, NULL);
    } else {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, on_dynamic_tb, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)vaddr);
        for (size_t i = 0; i < n; i++)
            qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), on_dynamic_mem, QEMU_PLUGIN_CB_NO_REGS,
                                             QEMU_PLUGIN_MEM_RW, NULL);
    }
    static const unsigned char marker[] = { 0x66, 0x87, 0xdb }; /* xchg %bx, %bx */
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (qemu_plugin_insn_size(insn) == sizeof marker && memcmp(qemu_plugin_insn_data(insn), marker, sizeof marker) == 0)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
}

PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    (void)argc;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
    return 0;
}
