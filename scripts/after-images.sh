#!/bin/bash
# after-images.sh: go test's -exec program in make test's plain pass. It
# starts each test binary once the local server images are built (or
# their build has ended in failure): make test builds the images in the
# background while the packages compile, and a test that needs Postgres
# or Redis must not look for an image that is half made.
#
# IDEM_IMAGES_DONE names the file the build writes when it ends; unset,
# the binary starts at once. A build that has not ended in 20 minutes is
# waited for no longer: the tests then say which image is missing.
set -u
if [ -n "${IDEM_IMAGES_DONE:-}" ]; then
	for _ in $(seq 6000); do
		[ -e "$IDEM_IMAGES_DONE" ] && break
		sleep 0.2
	done
fi
exec "$@"
