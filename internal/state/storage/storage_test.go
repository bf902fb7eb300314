package storage

import "testing"

// TestOptions: only full tiles and issuers are immutable (cacheable
// forever); everything that changes or is private is not.
func TestOptions(t *testing.T) {
	for key, want := range map[string]PutOptions{
		"checkpoint":              {ContentType: "text/plain; charset=utf-8"},
		"tile/0/000":              {ContentType: "application/octet-stream", Immutable: true},
		"tile/1/x001/234":         {ContentType: "application/octet-stream", Immutable: true},
		"tile/0/000.p/12":         {ContentType: "application/octet-stream"},
		"tile/data/000":           {ContentType: "application/octet-stream", ContentEncoding: "gzip", Immutable: true},
		"tile/data/000.p/3":       {ContentType: "application/octet-stream", ContentEncoding: "gzip"},
		"tile/names/000":          {ContentType: "application/jsonl; charset=utf-8", ContentEncoding: "gzip", Immutable: true},
		"tile/names/x001/000.p/3": {ContentType: "application/jsonl; charset=utf-8", ContentEncoding: "gzip"},
		"issuer/" + hex64:         {ContentType: "application/pkix-cert", Immutable: true},
		"log.v3.json":             {ContentType: "application/json"},
		"roots.pem":               {ContentType: "text/plain; charset=utf-8"},
		"fence/" + hex64:          {ContentType: "text/plain; charset=utf-8"},
		StagingPrefix + "5-abcd":  {ContentType: "application/octet-stream"},
		"something-else":          {ContentType: "application/octet-stream"},
	} {
		if got := Options(key); got != want {
			t.Errorf("Options(%q) = %+v, want %+v", key, got, want)
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
