package httpload

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"
)

// maxReply is how much of an answer's body is recorded (decoded).
const maxReply = 1 << 16

// readReply reads up to maxReply bytes of an answer's body, decoded as
// its Content-Encoding says (gzip, deflate) where the transport did not
// decode it itself: Go's transport decodes only what it asked for, and a
// request given its own Accept-Encoding (-H "Accept-Encoding: gzip") got
// the compressed bytes, which differ from answer to answer (gzip's
// header has a time in it), so every replay of a correct service failed
// replay-fidelity. A body that does not decode is recorded as it came.
func readReply(resp *http.Response) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil || resp.Uncompressed {
		return raw, err
	}
	var r io.Reader
	switch strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))) {
	case "gzip", "x-gzip":
		zr, zerr := gzip.NewReader(bytes.NewReader(raw))
		if zerr != nil {
			return raw, nil
		}
		r = zr
	case "deflate": // zlib-wrapped, as RFC 9110 says; raw deflate from some servers
		if zr, zerr := zlib.NewReader(bytes.NewReader(raw)); zerr == nil {
			r = zr
		} else {
			r = flate.NewReader(bytes.NewReader(raw))
		}
	default:
		return raw, nil
	}
	b, derr := io.ReadAll(io.LimitReader(r, maxReply))
	if derr != nil && derr != io.ErrUnexpectedEOF || len(b) == 0 && len(raw) > 0 {
		return raw, nil
	}
	return b, nil
}
