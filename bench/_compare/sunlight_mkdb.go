//go:build ignore

// Command sunlight_mkdb creates the checkpoints database that Sunlight
// needs before its first start: an SQLite file with the table its README
// gives. bench/compare.sh copies this file into the scratch module where it
// builds Sunlight and builds it there with Sunlight's own SQLite driver, so
// the comparison needs no sqlite3 command. It is not part of Mosaic's
// module (the build constraint keeps it out), which does not depend on
// SQLite.
//
// Usage: sunlight_mkdb FILE (FILE must not exist yet).
package main

import (
	"fmt"
	"os"

	"crawshaw.io/sqlite"
	"crawshaw.io/sqlite/sqlitex"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sunlight_mkdb FILE")
		os.Exit(2)
	}
	if err := create(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "sunlight_mkdb: %v\n", err)
		os.Exit(1)
	}
}

func create(path string) error {
	// Refuse an existing file: Sunlight's checkpoints database is its lock,
	// never to be replaced under a log.
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s already exists", path)
	}
	conn, err := sqlite.OpenConn(path, sqlite.SQLITE_OPEN_READWRITE|sqlite.SQLITE_OPEN_CREATE)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	err = sqlitex.ExecTransient(conn, "CREATE TABLE checkpoints (logID BLOB PRIMARY KEY, body BLOB NOT NULL) STRICT", nil)
	if cerr := conn.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("creating the checkpoints table in %s: %w", path, err)
	}
	return nil
}
