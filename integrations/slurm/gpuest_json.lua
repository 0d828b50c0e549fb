-- gpuest_json.lua: a JSON decoder for the job_submit plugin (gpuest_slurm.lua).
--
-- Slurm 22.05 runs job_submit.lua in Lua 5.1 with no JSON library, and a site's
-- controller should not need one installed for gpuest. The plugin reads what
-- `gpuest --json estimate` prints (protobuf's JSON mapping), so it decodes the
-- whole text rather than pattern-matching keys: a field gpuest adds later, or a
-- message that quotes a key, cannot be mistaken for the recommendation.
--
-- decode(text) returns the value, or nil and the reason; it never raises.
-- Non-ASCII \u escapes decode to "?": every value the plugin reads is ASCII.

local M = {}

local MAX_DEPTH = 64
local ESCAPES = {
  ['"'] = '"', ["\\"] = "\\", ["/"] = "/",
  b = "\b", f = "\f", n = "\n", r = "\r", t = "\t",
}
local LITERALS = { ["true"] = true, ["false"] = false, ["null"] = M }  -- M marks null

local function skip_space(s, i)
  return s:find("[^ \t\r\n]", i) or #s + 1
end

local decode_value

local function decode_string(s, i)
  local parts, j = {}, i + 1
  while true do
    local k = s:find('["\\]', j)
    if not k then error("unterminated string at " .. i) end
    parts[#parts + 1] = s:sub(j, k - 1)
    if s:sub(k, k) == '"' then return table.concat(parts), k + 1 end
    local c = s:sub(k + 1, k + 1)
    if c == "u" then
      local hex = s:sub(k + 2, k + 5)
      if not hex:find("^%x%x%x%x$") then error("bad \\u escape at " .. k) end
      local code = tonumber(hex, 16)
      parts[#parts + 1] = code < 128 and string.char(code) or "?"
      j = k + 6
    elseif ESCAPES[c] then
      parts[#parts + 1] = ESCAPES[c]
      j = k + 2
    else
      error("bad escape at " .. k)
    end
  end
end

local function decode_container(s, i, depth, close, read_member)
  if depth >= MAX_DEPTH then error("nested deeper than " .. MAX_DEPTH) end
  local result = {}
  i = skip_space(s, i + 1)
  if s:sub(i, i) == close then return result, i + 1 end
  while true do
    i = read_member(result, i)
    i = skip_space(s, i)
    local c = s:sub(i, i)
    if c == close then return result, i + 1 end
    if c ~= "," then error("expected ',' or '" .. close .. "' at " .. i) end
    i = skip_space(s, i + 1)
  end
end

function decode_value(s, i, depth)
  i = skip_space(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    return decode_container(s, i, depth, "}", function(object, j)
      if s:sub(j, j) ~= '"' then error("expected a key at " .. j) end
      local key
      key, j = decode_string(s, j)
      j = skip_space(s, j)
      if s:sub(j, j) ~= ":" then error("expected ':' at " .. j) end
      object[key], j = decode_value(s, j + 1, depth + 1)
      return j
    end)
  elseif c == "[" then
    return decode_container(s, i, depth, "]", function(array, j)
      array[#array + 1], j = decode_value(s, j, depth + 1)
      return j
    end)
  elseif c == '"' then
    return decode_string(s, i)
  end
  local number = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if number and tonumber(number) then return tonumber(number), i + #number end
  for word, value in pairs(LITERALS) do
    if s:sub(i, i + #word - 1) == word then return value, i + #word end
  end
  error("unexpected " .. (c == "" and "end of text" or ("'" .. c .. "'")) .. " at " .. i)
end

function M.decode(text)
  if type(text) ~= "string" then return nil, "not text" end
  local ok, value, next_index = pcall(decode_value, text, 1, 0)
  if not ok then return nil, (tostring(value):gsub("^.-:%d+: ", "")) end
  if skip_space(text, next_index) <= #text then
    return nil, "trailing text at " .. next_index
  end
  return value
end

-- The null marker, so a caller can tell null from an absent key.
M.null = M

return M
