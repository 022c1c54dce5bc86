#include "CMosquitto.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// Every function boardd calls: its name, return type and parameters.
#define BDM_FUNCTIONS(X, V) \
    X(int, lib_init, (void), ()) \
    X(int, lib_version, (int *a, int *b, int *c), (a, b, c)) \
    X(struct mosquitto *, new, (const char *id, bool c, void *o), (id, c, o)) \
    V(void, destroy, (struct mosquitto *m), (m)) \
    X(int, username_pw_set, (struct mosquitto *m, const char *u, const char *p), (m, u, p)) \
    X(int, tls_set, (struct mosquitto *m, const char *a, const char *b, const char *c, const char *d, \
                     int (*f)(char *, int, int, void *)), (m, a, b, c, d, f)) \
    X(int, int_option, (struct mosquitto *m, enum mosq_opt_t o, int v), (m, o, v)) \
    X(int, tls_opts_set, (struct mosquitto *m, int r, const char *v, const char *c), (m, r, v, c)) \
    X(int, tls_insecure_set, (struct mosquitto *m, bool v), (m, v)) \
    X(int, will_set, (struct mosquitto *m, const char *t, int n, const void *p, int q, bool r), (m, t, n, p, q, r)) \
    V(void, connect_callback_set, (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int)), (m, f)) \
    V(void, message_callback_set, (struct mosquitto *m, \
                                   void (*f)(struct mosquitto *, void *, const struct mosquitto_message *)), (m, f)) \
    V(void, log_callback_set, (struct mosquitto *m, void (*f)(struct mosquitto *, void *, int, const char *)), (m, f)) \
    X(int, connect_async, (struct mosquitto *m, const char *h, int p, int k), (m, h, p, k)) \
    X(int, socket, (struct mosquitto *m), (m)) \
    X(bool, want_write, (struct mosquitto *m), (m)) \
    X(int, loop_read, (struct mosquitto *m, int n), (m, n)) \
    X(int, loop_write, (struct mosquitto *m, int n), (m, n)) \
    X(int, loop_misc, (struct mosquitto *m), (m)) \
    X(int, disconnect, (struct mosquitto *m), (m)) \
    X(int, publish, (struct mosquitto *m, int *i, const char *t, int n, const void *p, int q, bool r), (m, i, t, n, p, q, r)) \
    X(int, subscribe, (struct mosquitto *m, int *i, const char *s, int q), (m, i, s, q)) \
    X(int, subscribe_v5, (struct mosquitto *m, int *i, const char *s, int q, int o, const mosquitto_property *p), \
      (m, i, s, q, o, p)) \
    X(int, unsubscribe, (struct mosquitto *m, int *i, const char *s), (m, i, s)) \
    X(const char *, strerror, (int e), (e)) \
    X(const char *, connack_string, (int c), (c)) \
    X(const char *, reason_string, (int c), (c))

#define BDM_POINTER(ret, name, params, args) static ret(*p_##name) params;
BDM_FUNCTIONS(BDM_POINTER, BDM_POINTER)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];
static int loaded = -1;

static void load(void) {
    void *h = dlopen("libmosquitto.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
#define BDM_RESOLVE(ret, name, params, args) \
    *(void **)(&p_##name) = dlsym(h, "mosquitto_" #name); \
    if (!p_##name) { snprintf(load_error, sizeof load_error, "libmosquitto.so.1 has no mosquitto_" #name); return; }
    BDM_FUNCTIONS(BDM_RESOLVE, BDM_RESOLVE)
    p_lib_init();
    loaded = 0;
}

int bdm_load(char *error, size_t error_len) {
    pthread_once(&once, load);
    if (loaded != 0 && error && error_len > 0) snprintf(error, error_len, "%s", load_error);
    return loaded;
}

// Callers call bdm_load first (MQTTLibrary.load); these assume it succeeded.
#define BDM_WRAPPER(ret, name, params, args) ret bdm_##name params { return p_##name args; }
#define BDM_VOID_WRAPPER(ret, name, params, args) void bdm_##name params { p_##name args; }
BDM_FUNCTIONS(BDM_WRAPPER, BDM_VOID_WRAPPER)
