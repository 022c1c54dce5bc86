// Layer 5: the daemon library (config, automation model, control socket).
// Filled by the daemon issue; the layer exists so the dependency order is fixed now.
