-- job_submit.lua: Slurm's job_submit/lua plugin for gpuest (README.md here says how
-- to install and configure it).
--
-- slurmctld calls slurm_job_submit for every submission while it holds its locks;
-- the work is in gpuest_slurm.lua, loaded from this file's directory together with
-- its configuration, gpuest_slurm.conf. An error in them must never block a
-- submission (Slurm rejects the job when this script raises), so every error is
-- caught, logged, and the job accepted as it was submitted.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local CONFIG_PATH = here .. "gpuest_slurm.conf"

local loaded, gpuest = pcall(require, "gpuest_slurm")
if not loaded then
  slurm.log_error("gpuest: cannot load %sgpuest_slurm.lua (%s): jobs are not sized", here, tostring(gpuest))
end

-- slurm.log_* and log_user take a format: user text goes through "%s" only.
local log = {
  info = function(text) slurm.log_info("%s", text) end,
  user = function(text) slurm.log_user("%s", text) end,
}

local function submit(job_desc, part_list)
  if not gpuest.has_description(job_desc.comment) then return true end
  local config, err = gpuest.load_config(CONFIG_PATH)
  if not config then error("bad configuration: " .. tostring(err), 0) end
  return gpuest.submit(job_desc, part_list, config, log)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not loaded then return slurm.SUCCESS end
  local ok, accepted = pcall(submit, job_desc, part_list)
  if not ok then
    slurm.log_error("gpuest: %s; the job is left unchanged", tostring(accepted))
    slurm.log_user("%s", "gpuest: the job was not sized by gpuest (an error in the plugin); it is submitted as it was")
    return slurm.SUCCESS
  end
  return accepted == false and slurm.ERROR or slurm.SUCCESS
end

-- A description changed after submission (scontrol update) is not estimated again.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
