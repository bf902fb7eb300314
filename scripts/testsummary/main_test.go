package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestOK"}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK","Elapsed":0.7}`,
		`{"Action":"pass","Package":"p/a","Test":"TestOK/sub","Elapsed":0.6}`,
		`{"Action":"pass","Package":"p/a","Test":"TestSlow","Elapsed":9.25}`,
		`{"Action":"output","Package":"p/a","Test":"TestS3","Output":"=== RUN   TestS3\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestS3","Output":"    s3_test.go:9: SKIPPING: MinIO is unavailable\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestS3","Output":"--- SKIP: TestS3 (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestS3"}`,
		`{"Action":"output","Package":"p/a","Test":"TestOK/skipped","Output":"    a_test.go:5: no index here\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestOK/skipped"}`,
		`{"Action":"pass","Package":"p/a","Elapsed":1.5}`,
		`{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    b_test.go:3: boom\n"}`,
		`{"Action":"fail","Package":"p/b","Test":"TestBad"}`,
		`{"Action":"fail","Package":"p/b","Elapsed":0.2}`,
		`{"Action":"output","Package":"p/c","Output":"?   \tp/c\t[no test files]\n"}`,
		`{"Action":"skip","Package":"p/c"}`,
	}, "\n")
	var out strings.Builder
	failed, err := summarize(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("failed = %v, err = %v; want a failure reported", failed, err)
	}
	for _, want := range []string{
		"ok  \tp/a\t1.500s", "--- FAIL: TestBad (p/b)", "boom", "FAIL\tp/b",
		"== 2 skipped:", "p/a TestS3: s3_test.go:9: SKIPPING: MinIO is unavailable", "p/a TestOK/skipped: a_test.go:5: no index here",
		"== slowest tests:\n      9.2s  p/a TestSlow\n      0.7s  p/a TestOK\n",
		"tests: 2 passed, 1 failed, 1 skipped (top-level tests; also 1 subtest skipped, listed above)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "p/c") {
		t.Errorf("a package without tests was reported:\n%s", out.String())
	}
}
