"""The op registry: one YAML per operator (registry/<op>.yaml) and its generator (aclnn_gen)."""
