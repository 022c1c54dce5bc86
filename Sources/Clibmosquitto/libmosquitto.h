// The system's libmosquitto (MQTT 3.1.1 and 5 client), found through
// pkg-config (libmosquitto.pc from libmosquitto-dev). The daemon calls it
// directly from Swift: no wrapper is needed, every function it uses takes
// plain arguments, and its callbacks are C function pointers with a user
// pointer (BoardDaemon/MQTT/MQTTClient.swift).
#include <mosquitto.h>
