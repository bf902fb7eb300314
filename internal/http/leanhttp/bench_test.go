package leanhttp

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/mosaic-ct/mosaic/internal/tools/h1client"
)

// BenchmarkServe: 32 goroutines post 3,000 bytes to a submission path and
// read a 200-byte answer over kept-alive loopback connections, served by
// net/http alone and through the lean path, the same handler behind both.
// Client and server share the process, and the client is the same, so the
// difference between the two is the server's. Compare with
// `benchstat -col /server`.
func BenchmarkServe(b *testing.B) {
	answer := strings.Repeat("a", 200)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	})
	body := bytes.Repeat([]byte("b"), 3000)
	for _, name := range []string{"net-http", "lean"} {
		b.Run("server="+name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: h}
			var shutdown func(context.Context) error = srv.Shutdown
			if name == "lean" {
				ls := &Server{HTTP: srv, IsLean: isTestLean, MaxBody: 1 << 20}
				go ls.Serve(ln)
				shutdown = ls.Shutdown
			} else {
				go srv.Serve(ln)
			}
			defer shutdown(context.Background())
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			c := &http.Client{Transport: h1client.New(tr)}
			defer c.CloseIdleConnections()
			url := "http://" + ln.Addr().String() + "/log/ct/v1/add-chain"
			b.SetParallelism(16) // 32 goroutines on 2 CPUs
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
