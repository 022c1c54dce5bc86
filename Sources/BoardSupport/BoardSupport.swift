// Layer 4: board descriptions (boards/*.yaml) and board detection.
// Filled by the board issue; the layer exists so the dependency order is fixed now.
