// Command addlog registers a log (origin and note verifier key) in a
// litewitness database, as 'witnessctl add-log' and 'witnessctl add-key' do.
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"log"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

func main() {
	db := flag.String("db", "", "litewitness database")
	origin := flag.String("origin", "", "log origin")
	vkey := flag.String("key", "", "log note verifier key")
	flag.Parse()
	conn, err := sqlite.OpenConn(*db, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// The schema litewitness creates (torchwood internal/network/witness OpenDB).
	if err := sqlitex.ExecScript(conn, `
		PRAGMA strict_types = ON;
		PRAGMA foreign_keys = ON;
		CREATE TABLE IF NOT EXISTS log (
			origin TEXT PRIMARY KEY,
			tree_size INTEGER NOT NULL,
			tree_hash TEXT NOT NULL
		);
		CREATE TABLE IF NOT EXISTS key (
			origin TEXT NOT NULL,
			key TEXT NOT NULL,
			FOREIGN KEY(origin) REFERENCES log(origin)
		);
		CREATE TABLE IF NOT EXISTS bastion (
			origin TEXT NOT NULL,
			bastion TEXT NOT NULL,
			FOREIGN KEY(origin) REFERENCES log(origin)
		);`); err != nil {
		log.Fatal(err)
	}
	empty := sha256.Sum256(nil)
	if err := sqlitex.Execute(conn, "INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)",
		&sqlitex.ExecOptions{Args: []any{*origin, base64.StdEncoding.EncodeToString(empty[:])}}); err != nil {
		log.Fatal(err)
	}
	if err := sqlitex.Execute(conn, "INSERT INTO key (origin, key) VALUES (?, ?)",
		&sqlitex.ExecOptions{Args: []any{*origin, *vkey}}); err != nil {
		log.Fatal(err)
	}
}
