package httpload

import (
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestReplyDecoded: a service that gzips its answers when asked, each
// with its own header time, answers the same JSON twice. Asked with a
// user's own Accept-Encoding (-H "Accept-Encoding: gzip"), Go's transport
// hands over the compressed bytes, which differed, and a correct
// service's every replay failed replay-fidelity. The reply recorded is
// the decoded body, equal both times; an answer not encoded, or one that
// says gzip and is not, is recorded as it came.
func TestReplyDecoded(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		switch r.URL.Path {
		case "/plain":
			_, _ = w.Write([]byte(`{"charge":"ch_1"}`))
		case "/lies":
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write([]byte(`{"charge":"ch_1"}`))
		default:
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.ModTime = time.Unix(int64(1_700_000_000+n), 0)
			_, _ = zw.Write([]byte(`{"charge":"ch_1"}`))
			_ = zw.Close()
		}
	}))
	defer srv.Close()
	get := func(path string) string {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := readReply(resp)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, path := range []string{"/gzip", "/gzip", "/plain", "/lies"} {
		if got := get(path); got != `{"charge":"ch_1"}` {
			t.Errorf("%s: recorded %q, want the JSON", path, got)
		}
	}
}
