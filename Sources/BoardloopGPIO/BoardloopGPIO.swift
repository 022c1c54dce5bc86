// Layer 3: GPIO. Chips, line requests and edge events as run-loop port sources.
// Filled by the GPIO issue (libgpiod backend over CGPIOD).
