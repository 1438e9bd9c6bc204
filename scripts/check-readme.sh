#!/usr/bin/env bash
# Runs the documentation's shell examples, in order, against one fresh service, as a new user
# would: README.md first, then docs/*.md by name (or the files given).
#
# A fenced ```sh block is run when the line before it is `<!-- readme-check -->` (invisible
# on GitHub); every marked block runs in one bash session, so a variable one block sets is
# there for the next. The service runs from a fresh copy of the working tree (the files git
# tracks or would track, node_modules linked) on the embedded database, with `npm start`, on a
# port other than 3000 (README_CHECK_PORT, default a free one); `AUTH=http://localhost:PORT` is
# exported for the examples, and a `localhost:3000` left in one becomes that port too. A command
# that fails, or a curl answered 4xx/5xx, fails the check.
#
#   scripts/check-readme.sh [FILE.md...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$#" -gt 0 ]; then
  pages=("$@")
else
  pages=("$root/README.md")
  for f in "$root"/docs/*.md; do pages+=("$f"); done   # the glob sorts them by name
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/readme-check-XXXXXX")"
service_pid=""

cleanup() {
  if [ -n "$service_pid" ]; then
    # The whole process group (setsid made npm its leader): npm exits on SIGTERM without
    # waiting for the server it started, which may still be closing its database. Wait until
    # nothing of the group is left (30 s at most, as long as the server's own shutdown may
    # take), then remove the directory it ran in.
    kill -TERM -- "-$service_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do
      kill -0 -- "-$service_pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL -- "-$service_pid" 2>/dev/null || true
    wait "$service_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port="${README_CHECK_PORT:-$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{const p=s.address().port;console.log(p===3000?3001:p);s.close()})")}"

# A fresh clone: the working tree's files, no data, no dist, no .env.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) | (cd "$root" && xargs -0 cp --parents -t "$work" 2>/dev/null) || true
ln -s "$root/node_modules" "$work/node_modules"

# The marked blocks, one script.
script="$work/.readme-examples.sh"
node - "$root" "$port" "${pages[@]}" > "$script" <<'NODE'
const fs = require('node:fs');
const path = require('node:path');
const [root, port, ...pages] = process.argv.slice(2);
const blocks = [];
for (const page of pages) {
  const name = path.relative(root, path.resolve(page));
  const lines = fs.readFileSync(page, 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '<!-- readme-check -->') continue;
    const open = lines[i + 1] ?? '';
    if (!/^```(sh|bash|shell)\s*$/.test(open)) throw new Error(`${name} line ${i + 2}: a readme-check marker must precede a \`\`\`sh block`);
    const body = [];
    for (i += 2; i < lines.length && !lines[i].startsWith('```'); i++) body.push(lines[i]);
    blocks.push({ name, line: i - body.length, body: body.join('\n') });
  }
}
if (blocks.length === 0) throw new Error('no <!-- readme-check --> blocks in the pages');
console.log(`export AUTH=http://localhost:${port}`);
for (const b of blocks) {
  console.log(`echo "== ${b.name} line ${b.line}" >&2`);
  console.log(b.body.replace(/localhost:3000/g, `localhost:${port}`));
}
NODE

cd "$work"
echo "readme-check: starting the service (npm start) in $work on port $port" >&2
# in a process group of its own (setsid), so that cleanup stops npm and the server under it
PORT="$port" HOST=127.0.0.1 LOG_LEVEL=warn setsid npm start > service.log 2>&1 &
service_pid=$!
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break
  kill -0 "$service_pid" 2>/dev/null || { cat service.log >&2; echo "readme-check: the service did not start" >&2; exit 1; }
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/readyz" > /dev/null || { cat service.log >&2; echo "readme-check: the service is not ready" >&2; exit 1; }

# curl as in the examples, but an HTTP error answer fails the check.
prelude='set -euo pipefail
curl() {
  local out status
  out=$(command curl --write-out "\n__HTTP_STATUS__%{http_code}" "$@") || return $?
  status=${out##*__HTTP_STATUS__}
  printf "%s\n" "${out%$'"'"'\n'"'"'__HTTP_STATUS__*}"
  if [ "$status" -ge 400 ]; then echo "readme-check: curl $* answered HTTP $status" >&2; return 22; fi
}
'
if bash -c "$prelude"$'\n'"$(cat "$script")"; then
  echo "readme-check: every marked example ran" >&2
else
  status=$?
  echo "readme-check: an example failed (exit $status); the service log:" >&2
  tail -n 30 service.log >&2
  exit "$status"
fi
