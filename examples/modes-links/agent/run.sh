#!/bin/sh
# A harness that builds a small tree whose modes and links are part of the answer.
set -e
a=/logs/artifacts
mkdir -p "$a/bin" "$a/private" "$a/empty" "$a/shared"
printf '#!/bin/sh\necho built\n' >"$a/bin/tool"
chmod 0750 "$a/bin/tool"
echo secret >"$a/private/key"
chmod 0600 "$a/private/key"
chmod 0700 "$a/private"
echo "read me" >"$a/README"
chmod 0444 "$a/README"
chmod 1777 "$a/shared"
ln "$a/README" "$a/README.hard"
ln -s ../README "$a/bin/readme-link"
ln -s bin/tool "$a/tool"
