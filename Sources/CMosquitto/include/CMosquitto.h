#ifndef BOARDD_CMOSQUITTO_H
#define BOARDD_CMOSQUITTO_H
// libmosquitto for boardd's MQTT client, loaded when a config has an
// mqtt: block (dlopen of libmosquitto.so.1), not linked: a boardd without
// MQTT never maps libmosquitto and the OpenSSL it brings (about 1.8 MiB
// of resident memory). The types and constants are libmosquitto's own
// header's (libmosquitto-dev); each bdm_NAME calls libmosquitto's
// mosquitto_NAME through a pointer resolved by bdm_load.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <stdbool.h>
#include <stddef.h>

/// Loads libmosquitto.so.1 and resolves every function below (once; later
/// calls return the first outcome), then calls mosquitto_lib_init. Returns
/// 0, or -1 with why in `error` (dlerror's text).
int bdm_load(char *error, size_t error_len);

int bdm_lib_version(int *major, int *minor, int *revision);
struct mosquitto *bdm_new(const char *id, bool clean_session, void *obj);
void bdm_destroy(struct mosquitto *mosq);
int bdm_username_pw_set(struct mosquitto *mosq, const char *username, const char *password);
int bdm_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath, const char *certfile, const char *keyfile,
                int (*pw_callback)(char *buf, int size, int rwflag, void *userdata));
int bdm_int_option(struct mosquitto *mosq, enum mosq_opt_t option, int value);
int bdm_tls_opts_set(struct mosquitto *mosq, int cert_reqs, const char *tls_version, const char *ciphers);
int bdm_tls_insecure_set(struct mosquitto *mosq, bool value);
int bdm_will_set(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload, int qos, bool retain);
void bdm_connect_callback_set(struct mosquitto *mosq, void (*on_connect)(struct mosquitto *, void *, int));
void bdm_message_callback_set(struct mosquitto *mosq, void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *));
void bdm_log_callback_set(struct mosquitto *mosq, void (*on_log)(struct mosquitto *, void *, int, const char *));
int bdm_connect_async(struct mosquitto *mosq, const char *host, int port, int keepalive);
int bdm_socket(struct mosquitto *mosq);
bool bdm_want_write(struct mosquitto *mosq);
int bdm_loop_read(struct mosquitto *mosq, int max_packets);
int bdm_loop_write(struct mosquitto *mosq, int max_packets);
int bdm_loop_misc(struct mosquitto *mosq);
int bdm_disconnect(struct mosquitto *mosq);
int bdm_publish(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen, const void *payload, int qos, bool retain);
int bdm_subscribe(struct mosquitto *mosq, int *mid, const char *sub, int qos);
int bdm_subscribe_v5(struct mosquitto *mosq, int *mid, const char *sub, int qos, int options, const mosquitto_property *properties);
int bdm_unsubscribe(struct mosquitto *mosq, int *mid, const char *sub);
const char *bdm_strerror(int mosq_errno);
const char *bdm_connack_string(int connack_code);
const char *bdm_reason_string(int reason_code);
#endif
