"""gpuest-collect: measure training jobs on a GPU node, one at a time, resumably.

``python3 -m gpuest.collect run PLAN --out DIR`` (``--dry-run`` on a CPU). Modules:
``plan`` (the YAML, expanded into jobs), ``zoo`` (builds a job's model), ``child`` (the
process that describes and trains one job), ``monitor`` (nvidia-smi and DCGM from
outside), ``runner`` (one job or pair in children, as a row whatever happens),
``store`` (the finished rows, append-only), ``clean`` (CSV in the datasets' schema) and
``calibrate`` (a GPU's context constant from the rows). See docs/collector.md.
"""
