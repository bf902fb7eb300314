package leanhttp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// TestResponse: what a handler sets cannot break the response's framing:
// the server's own Content-Length, Connection and Date replace a handler's
// (whatever their case), CR and LF in a value cannot start a new header, an
// invalid name is dropped, and 204 has no body and no Content-Length.
func TestResponse(t *testing.T) {
	w := &response{header: make(http.Header)}
	w.header["content-length"] = []string{"99"}
	w.header.Set("Connection", "keep-alive")
	w.header.Set("X-Inject", "a\r\nSet-Cookie: stolen")
	w.header["Bad Name"] = []string{"x"}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, "<html>hello")
	raw := w.appendTo(nil, true)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || string(body) != "<html>hello" || resp.ContentLength != 11 {
		t.Errorf("%d %q length %d, want 201, the body, 11", resp.StatusCode, body, resp.ContentLength)
	}
	if bytes.Count(bytes.ToLower(raw), []byte("\r\nconnection:")) != 1 || !bytes.Contains(raw, []byte("\r\nConnection: close\r\n")) ||
		bytes.Count(bytes.ToLower(raw), []byte("\r\ncontent-length:")) != 1 {
		t.Errorf("the handler's Connection or Content-Length was sent:\n%s", raw)
	}
	if resp.Header.Get("Set-Cookie") != "" || resp.Header.Get("X-Inject") != "a  Set-Cookie: stolen" {
		t.Errorf("X-Inject %q, Set-Cookie %q: a value started a header", resp.Header.Get("X-Inject"), resp.Header.Get("Set-Cookie"))
	}
	if resp.Header.Get("Date") == "" || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("Date %q, Content-Type %q", resp.Header.Get("Date"), resp.Header.Get("Content-Type"))
	}
	for k := range resp.Header {
		if k == "Bad Name" {
			t.Error("an invalid header name was sent")
		}
	}

	w = &response{header: make(http.Header)}
	w.WriteHeader(http.StatusNoContent)
	if _, err := io.WriteString(w, "x"); !errors.Is(err, http.ErrBodyNotAllowed) {
		t.Errorf("a body for 204: %v, want ErrBodyNotAllowed", err)
	}
	out := w.appendTo(nil, false)
	if bytes.Contains(out, []byte("Content-Length")) || !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		t.Errorf("204: %q, want no Content-Length and no body", out)
	}
}
