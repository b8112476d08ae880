# tools/bench/plots/jsonl.awk: one value out of homarpc-bench's JSON lines (its --json_out
# files, one JSON object per line), for tools/bench-report.sh and plot.sh (owned with them).
# POSIX awk (Debian's mawk): no jq needed.
#
#   awk -v want=FIELD -v where="KEY=VALUE<TAB>KEY=VALUE..." -f jsonl.awk FILE...
#
# Each line that is a JSON object is parsed in full (strings with escapes, nested objects and
# arrays) and flattened into paths: a top-level key is its name, a nested one `outer.inner`, an
# array element `name[i]` (from 0), so the first bucket's p99 is `buckets[0].p99_slowdown`.
# A line matches when every KEY (a path) is present and its value, as text (strings unescaped,
# numbers as written), equals VALUE. Prints FIELD's value from the last matching line, or
# nothing when no line matches, the field is absent, or it is null. Lines that are not JSON
# objects, or do not parse, are skipped.

function skip_ws() {
  while (pos <= n && index(" \t\r\n", substr(s, pos, 1)) > 0) pos++
}

# The string starting at pos (on its opening quote), unescaped; pos moves past it.
function parse_string(    out, c) {
  pos++
  out = ""
  while (pos <= n) {
    c = substr(s, pos, 1)
    if (c == "\"") {
      pos++
      return out
    }
    if (c == "\\") {
      pos++
      c = substr(s, pos, 1)
      if (c == "n") c = "\n"
      else if (c == "t") c = "\t"
      else if (c == "r") c = "\r"
      else if (c == "b" || c == "f") c = " "
      else if (c == "u") { c = "?"; pos += 4 }  # not needed here: a placeholder
      # else \" \\ \/ stand for themselves
    }
    out = out c
    pos++
  }
  bad = 1  # unterminated
  return out
}

# The value at pos, stored under `path` (scalars) or its children (objects, arrays).
# Returns 1, or 0 on a syntax error.
function parse_value(path,    c, start, v) {
  skip_ws()
  c = substr(s, pos, 1)
  if (c == "{") return parse_object(path)
  if (c == "[") return parse_array(path)
  if (c == "\"") {
    v = parse_string()
    if (bad) return 0
    flat[path] = v
    return 1
  }
  start = pos
  while (pos <= n && index(",}] \t\r\n", substr(s, pos, 1)) == 0) pos++
  v = substr(s, start, pos - start)
  if (v == "") return 0
  if (v != "null") flat[path] = v
  return 1
}

function parse_object(path,    key, c) {
  pos++
  skip_ws()
  if (substr(s, pos, 1) == "}") { pos++; return 1 }
  for (;;) {
    skip_ws()
    if (substr(s, pos, 1) != "\"") return 0
    key = parse_string()
    if (bad) return 0
    skip_ws()
    if (substr(s, pos, 1) != ":") return 0
    pos++
    if (!parse_value(path == "" ? key : path "." key)) return 0
    skip_ws()
    c = substr(s, pos, 1)
    pos++
    if (c == "}") return 1
    if (c != ",") return 0
  }
}

function parse_array(path,    i, c) {
  pos++
  skip_ws()
  if (substr(s, pos, 1) == "]") { pos++; return 1 }
  for (i = 0; ; i++) {
    if (!parse_value(path "[" i "]")) return 0
    skip_ws()
    c = substr(s, pos, 1)
    pos++
    if (c == "]") return 1
    if (c != ",") return 0
  }
}

BEGIN {
  nconds = (where == "") ? 0 : split(where, conds, "\t")
  for (i = 1; i <= nconds; i++) {
    eq = index(conds[i], "=")
    if (eq == 0) { cond_key[i] = conds[i]; cond_value[i] = "" }
    else { cond_key[i] = substr(conds[i], 1, eq - 1); cond_value[i] = substr(conds[i], eq + 1) }
  }
  found = 0
}

{
  s = $0
  n = length(s)
  pos = 1
  bad = 0
  split("", flat)
  skip_ws()
  if (substr(s, pos, 1) != "{") next
  if (!parse_value("") || bad) next
  skip_ws()
  if (pos <= n) next  # trailing text: not one JSON object
  for (i = 1; i <= nconds; i++) {
    if (!(cond_key[i] in flat) || flat[cond_key[i]] != cond_value[i]) next
  }
  found = 1
  result = (want in flat) ? flat[want] : ""
}

END {
  if (found && result != "") print result
}
