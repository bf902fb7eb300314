package config

import (
	"net"
	"testing"
)

func TestListenError(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	_, err = net.Listen("tcp", addr)
	if err == nil {
		t.Fatal("listened twice on one port")
	}
	got := ListenError(addr, err, "choose another").Error()
	if want := addr + " is already in use by another process (is Mosaic already running?); choose another"; got != want {
		t.Errorf("ListenError = %q, want %q", got, want)
	}
}
