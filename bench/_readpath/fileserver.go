//go:build ignore

// Command fileserver is bench/readpath.sh's reference point: Go's plain
// net/http file server (http.FileServer) on a log's storage directory,
// adding only what a Static CT client needs that the directory cannot say
// (Content-Encoding: gzip on data tiles, the content types). It shows what
// net/http itself costs per request on the same tiles, with nothing of
// Mosaic's. Not part of Mosaic (the build constraint keeps it out).
//
// Usage: go run fileserver.go ADDR DIR
package main

import (
	"log"
	"net/http"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: fileserver ADDR DIR")
	}
	fs := http.FileServer(http.Dir(os.Args[2]))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/checkpoint":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		case strings.HasPrefix(r.URL.Path, "/tile/data/"):
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/octet-stream")
		default:
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		fs.ServeHTTP(w, r)
	})
	log.Fatal(http.ListenAndServe(os.Args[1], h))
}
