package leanhttp

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is a lean request's http.ResponseWriter. It keeps the status,
// the headers and the body until the handler returns; serveRequest then
// writes them at once, with a Content-Length.
type response struct {
	header http.Header
	code   int
	body   []byte
}

func (w *response) Header() http.Header { return w.header }

// WriteHeader records the status, once, as net/http does. Informational
// (1xx) statuses are not sent: no handler on the lean path uses them.
func (w *response) WriteHeader(code int) {
	if w.code != 0 || code < 200 || code > 999 {
		return
	}
	w.code = code
}

// Write appends p to the body (http.ErrBodyNotAllowed for 204 and 304, as
// net/http answers).
func (w *response) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.code) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.body == nil {
		w.body = make([]byte, 0, max(len(p), 512))
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

func bodyAllowed(code int) bool {
	return code != http.StatusNoContent && code != http.StatusNotModified
}

// wantsClose reports whether the handler asked for the connection to be
// closed after this response (Connection: close).
func (w *response) wantsClose() bool {
	return httpguts.HeaderValuesContainsToken(w.header["Connection"], "close")
}

// hopHeaders are the headers serveRequest writes itself; a handler's are
// dropped.
var hopHeaders = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Date": true}

// appendTo appends the response to b: the status line, the handler's
// headers in sorted order (an invalid name dropped, CR and LF in a value
// turned into spaces, as net/http does), Date, Content-Type sniffed if the
// handler set none and the body is not empty, Content-Length, Connection:
// close if closing, and the body.
func (w *response) appendTo(b []byte, closing bool) []byte {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.code), 10)
	b = append(b, ' ')
	if text := http.StatusText(w.code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(w.code), 10)
	}
	b = append(b, "\r\n"...)
	if _, ok := w.header["Content-Type"]; !ok && len(w.body) > 0 {
		w.header.Set("Content-Type", http.DetectContentType(w.body))
	}
	var keysArr [16]string
	keys := keysArr[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) || hopHeaders[textproto.CanonicalMIMEHeaderKey(k)] {
			continue
		}
		for _, v := range w.header[k] {
			v = textproto.TrimString(headerNewlineToSpace.Replace(v))
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "Date: "...)
	b = time.Now().UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\n"...)
	if bodyAllowed(w.code) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	if closing {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, w.body...)
}

var headerNewlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")
