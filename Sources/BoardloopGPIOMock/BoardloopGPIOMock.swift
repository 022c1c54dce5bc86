// Layer 3: the mock GPIO chip (a product: the demo board and users' tests use it).
// Filled by the GPIO issue.
