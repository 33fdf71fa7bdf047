//! Nothing: the benchmarks are in `benches/`, the profiling workload in `examples/`.
