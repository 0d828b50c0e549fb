-- cli_filter.lua: `GPUEST_DESCRIPTION=FILE sbatch ...` for the gpuest job_submit plugin.
--
-- Slurm runs this in sbatch, srun and salloc on the submit host, as the submitting
-- user. It reads the user's description file there and hands it to the controller
-- inline, in the job's comment ("gpuest:{...}"), so that slurmctld needs neither the
-- user's file system nor a path it has to trust. (A `--gpuest=FILE` option of its own
-- would take a SPANK plugin, in C: a cli_filter cannot add options.) Nothing here can
-- stop a submission: a file it cannot read is reported and the job goes on without it.

local ENV = "GPUEST_DESCRIPTION"

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
  local path = os.getenv(ENV)
  if not path or path == "" then return slurm.SUCCESS end
  if options.comment and options.comment ~= "" then
    slurm.log_error("gpuest: the job has a --comment; %s=%s is not used", ENV, path)
    return slurm.SUCCESS
  end
  local file, err = io.open(path, "r")
  if not file then
    slurm.log_error("gpuest: cannot read %s (%s); the job is submitted without it", ENV, tostring(err))
    return slurm.SUCCESS
  end
  local text = file:read("*a") or ""
  file:close()
  options.comment = "gpuest:" .. text
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
