#!/bin/bash
# make check-http: the example services of idemcheck's black-box mode, in
# Go (examples/httpsvc, over a shared Redis), Python (examples/pysvc, over
# a shared SQLite file) and Node/Express (examples/nodesvc, over shared
# files; UUID keys, an Authorization header and a form body, declared on
# flags alone). Each correct variant must pass every checker; each mutant
# must fail with the checker and cause that name its bug (--expect).
#
#   examples/check-http.sh BIN HTTPSVC   (HTTP_DURATION, SEED from the environment)
set -u
bin=$1
httpsvc=$2
dur=${HTTP_DURATION:-6s}
seed=${SEED:-1}
out=results/check-http
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
fail=0

# run NAME EXPECT COMMAND [FLAGS...]: EXPECT is "pass" or checker:cause.
run() {
	local name=$1 exp=$2 cmd=$3
	shift 3
	local args=(http --cmd "$cmd" --duration "$dur" --seed "$seed" --out "$out/$name" "$@")
	if [ "$exp" = pass ]; then
		echo "== $name: every checker must pass"
		"$bin" "${args[@]}" >"$out/$name.out" 2>&1
		local rc=$?
		grep -E '^(NOTHING|PASS|FAIL|  CRASH|     causes)' "$out/$name.out"
		[ $rc = 0 ] || { echo "check-http: $name FAILED (exit $rc; see $out/$name/report.txt)"; fail=1; }
	else
		echo "== $name: $exp must fail"
		"$bin" "${args[@]}" --expect "$exp" >"$out/$name.out" 2>&1
		local rc=$?
		grep -E '^(NOTHING|FAIL|expected|NOT|  CRASH|     causes)' "$out/$name.out"
		[ $rc = 0 ] || { echo "check-http: mutant $name SURVIVED (exit $rc; see $out/$name/report.txt)"; fail=1; }
	fi
}

# Go: stores.Run over Redis, and its classic middleware bugs.
for m in correct=pass lock-in-process=at-most-once:concurrent no-fingerprint=status-codes:422-old-answer \
	memory-map=at-most-once:after-done release-on-error=at-most-once:after-error \
	downstream-key=pass fresh-downstream-key=at-most-once:after-error; do
	run "go-${m%%=*}" "${m#*=}" "$httpsvc -variant ${m%%=*}" --instances 2 --server redis
done

# Python: SQLite shared by the instances, and its classic bugs.
for m in correct=pass check-then-act=at-most-once:concurrent errors-not-cached=at-most-once:after-error \
	memory-dict=at-most-once:after-done no-fingerprint=status-codes:422-old-answer; do
	v=${m%%=*}
	run "py-$v" "${m#*=}" "IDEM_DB=$tmp/py-$v.db python3 examples/pysvc/service.py $v" --instances 2
done
# The key in a header of the service's own (--key-header), or in the body
# (--key-at).
run py-x-key pass "IDEM_KEY_HEADER=X-Idempotency-Key IDEM_DB=$tmp/py-x-key.db python3 examples/pysvc/service.py correct" \
	--instances 2 --key-header X-Idempotency-Key
# A fingerprint over the whole URL, Host included: idemcheck sends every
# instance one Host, as a load balancer in front of them would.
run py-url-fingerprint pass "IDEM_FP_URL=1 IDEM_DB=$tmp/py-url-fingerprint.db python3 examples/pysvc/service.py correct" --instances 2
run py-body-key pass "IDEM_KEY_AT=idempotency_key IDEM_DB=$tmp/py-body-key.db python3 examples/pysvc/service.py correct" \
	--instances 2 --key-at idempotency_key

# Node/Express: the request declared on flags; the article's middleware
# rejects asynchronously, which crashes Node (one instance, more provider
# failures: each one is a crash and a second charge).
node=(--path /v1/payments -H "Authorization: Bearer test-token" --body-type form --body currency=EUR
	--order-at reference --amount-at amount_cents)
nodecmd() { echo "IDEM_STORE_DIR=$tmp/node-$1 NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} node examples/nodesvc/server.js $1"; }
run node-correct pass "$(nodecmd correct)" --instances 2 "${node[@]}"
run node-article at-most-once:after-error "$(nodecmd article)" --instances 1 --provider-fail 0.15 "${node[@]}"
run node-memory-map at-most-once:after-done "$(nodecmd memory-map)" --instances 2 "${node[@]}"
run node-no-fingerprint status-codes:422-old-answer "$(nodecmd no-fingerprint)" --instances 2 "${node[@]}"

if [ $fail = 0 ]; then echo "check-http: every correct example passed, every mutant failed as expected (Go, Python, Node)"; fi
exit $fail
