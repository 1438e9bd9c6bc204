#!/usr/bin/env bash
# Third-party scanners over the running service, anonymously and signed in as an administrator,
# and the count that must stay at zero: answers 5xx, error-level log lines (level 50) and stack
# traces in the service's log. Needs wapiti and sqlmap (Debian: apt-get install wapiti sqlmap).
#
#   scripts/scan.sh            # the embedded database, in a fresh temporary DATA_DIR
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/scan scripts/scan.sh   # a database of its own (emptied first)
#
# SCAN_SECONDS (default 240) bounds each wapiti run, SCAN_SQLMAP_SECONDS (default 300) each sqlmap target; SCAN_PORT (default 4700) is the service's port.
# The rate limits are raised for the run, so that the scanners' requests reach the handlers
# instead of being refused with 429. Exits 1 when any count is not zero.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wapiti >/dev/null && command -v sqlmap >/dev/null || { echo "scan.sh needs wapiti and sqlmap (apt-get install wapiti sqlmap)" >&2; exit 2; }

PORT=${SCAN_PORT:-4700}
SECONDS_EACH=${SCAN_SECONDS:-240}
SQLMAP_SECONDS=${SCAN_SQLMAP_SECONDS:-300}
BASE="http://127.0.0.1:$PORT"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/auth-scan.XXXXXX")
export HOST=127.0.0.1 PORT NODE_ENV=development LOG_LEVEL=info REDIS_URL='' DATA_DIR="$OUT/data" DATABASE_URL="${DATABASE_URL:-}"
export JWT_SECRET=$(openssl rand -hex 32) SESSION_SECRET=$(openssl rand -hex 32)
for limit in LOGIN VALIDATE TOKEN USER CLIENT_AUTH_FAILURES; do export "RATE_LIMIT_${limit}_PER_MIN=100000000"; done
ADMIN_PASSWORD="scanner quiet harbor 7"

node scripts/launch.mjs server >"$OUT/service.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf "$BASE/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "$BASE/readyz" >/dev/null || { echo "the service did not become ready; its log: $OUT/service.log" >&2; exit 1; }
node scripts/launch.mjs cli/main user create --username scanadmin --email scanadmin@example.com --password "$ADMIN_PASSWORD" --role admin >/dev/null

# the administrator's session cookie, from the sign-in form (its _csrf field first), in wapiti's JSON cookie format
jar="$OUT/cookies.txt"
csrf=$(curl -s -c "$jar" "$BASE/login" | grep -o 'name="_csrf" value="[^"]*"' | head -1 | sed 's/.*value="//; s/"$//')
curl -s -b "$jar" -c "$jar" -o /dev/null --data-urlencode "_csrf=$csrf" --data-urlencode step=password --data-urlencode "login=scanadmin" --data-urlencode "password=$ADMIN_PASSWORD" "$BASE/login"
python3 - "$jar" >"$OUT/cookies.json" <<'PY'
import json, sys
cookies = {}
for line in open(sys.argv[1]):
    if line.startswith('#HttpOnly_'): line = line[len('#HttpOnly_'):]
    elif line.startswith('#') or not line.strip(): continue
    domain, _, path, secure, expires, name, value = line.rstrip('\n').split('\t')
    cookies.setdefault(domain, {}).setdefault(path, {})[name] = {'value': value, 'expires': None, 'secure': secure == 'TRUE', 'port': None, 'version': 0}
json.dump(cookies, sys.stdout)
PY

modules="sql,blindsql,xss,permanentxss,exec,file,crlf,redirect,ssrf"
timeout $((SECONDS_EACH + 60)) wapiti -u "$BASE/" --scope domain -m "$modules" --max-scan-time "$SECONDS_EACH" --flush-session -f txt -o "$OUT/wapiti-anonymous.txt" >"$OUT/wapiti-anonymous.out" 2>&1 || true
# signed in, the crawl keeps to the admin panel's folder: anywhere else it finds the sign-out form
# and the rest of its run is anonymous (wapiti 3.0.4's -x, which would exclude it, fails on Python 3.11)
timeout $((SECONDS_EACH + 60)) wapiti -u "$BASE/admin/" --scope folder -c "$OUT/cookies.json" -m "$modules" --max-scan-time "$SECONDS_EACH" --flush-session -f txt -o "$OUT/wapiti-admin.txt" >"$OUT/wapiti-admin.out" 2>&1 || true

# sqlmap over the client and sign-in APIs (JSON bodies) and the sign-in page's query
json=(--headers="Content-Type: application/json")
ignore=--ignore-code=400,401,403,404,409,422,423,429
while IFS='|' read -r path body; do
  timeout "$SQLMAP_SECONDS" sqlmap -u "$BASE$path" --data="$body" "${json[@]}" "$ignore" --batch --level 3 --risk 2 --flush-session --output-dir="$OUT/sqlmap" >>"$OUT/sqlmap.out" 2>&1 || true
done <<'EOF'
/api/auth/login|{"login":"a*","password":"b*"}
/api/sso/token|{"client_id":"a*","client_secret":"b*","username":"c*"}
/api/sso/validate|{"client_id":"a*","client_secret":"b*","token":"c*"}
/api/login|{"username":"a*","password":"b*"}
EOF
timeout "$SQLMAP_SECONDS" sqlmap -u "$BASE/sso/login?client_id=a&state=b&redirect_uri=c" "$ignore" --batch --level 3 --risk 2 --flush-session --output-dir="$OUT/sqlmap" >>"$OUT/sqlmap.out" 2>&1 || true
timeout "$SQLMAP_SECONDS" sqlmap -u "$BASE/admin/users?q=a" --cookie="$(awk -F'\t' '!/^#/ || /^#HttpOnly_/ {if (NF==7) printf "%s=%s; ", $6, $7}' "$jar")" "$ignore" --batch --level 3 --risk 2 --flush-session --output-dir="$OUT/sqlmap" >>"$OUT/sqlmap.out" 2>&1 || true

kill $pid; wait $pid 2>/dev/null || true
trap - EXIT
log="$OUT/service.log"
requests=$(grep -c '"statusCode":' "$log" || true)
server_errors=$(grep -c '"statusCode":5' "$log" || true)
errors=$(grep -c '"level":50' "$log" || true)
stacks=$(grep -cE '^\s+at |\\n\s+at ' "$log" || true)
echo "requests logged: $requests; answers 5xx: $server_errors; level 50 lines: $errors; stack traces: $stacks"
grep -h -A12 'Summary of vulnerabilities' "$OUT"/wapiti-*.txt 2>/dev/null | grep -E ':\s+[1-9]' || echo "wapiti: no finding"
grep -E "^\[.*\] \[(CRITICAL|INFO)\] .*(injectable|appears to be)" "$OUT/sqlmap.out" | grep -v 'not injectable\|might not be\|does not seem' || echo "sqlmap: no injectable parameter"
echo "reports and the service's log: $OUT"
[ "$server_errors" = 0 ] && [ "$errors" = 0 ] && [ "$stacks" = 0 ]
