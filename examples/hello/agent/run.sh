#!/bin/sh
# The example task's "agent harness": it writes its work into /logs/artifacts (a file, a
# folder with an executable and a read-only file, a symlink), and, like a careless harness,
# leaves a background process behind that escapes into its own session. The supervisor kills
# it; the receipt says termination was witnessed.
set -e
out=/logs/artifacts
echo "the answer is 42" >"$out/solution.txt"
mkdir -p "$out/bin"
printf '#!/bin/sh\necho tool ran\n' >"$out/bin/tool"
chmod 0755 "$out/bin/tool"
echo "keep me as I am" >"$out/bin/readonly.txt"
chmod 0444 "$out/bin/readonly.txt"
ln -s solution.txt "$out/latest"
# A process that outlives the harness unless the supervisor finds it.
setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo "harness done"
