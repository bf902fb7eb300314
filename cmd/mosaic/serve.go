package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/internal/process/devmode"
	"github.com/mosaic-ct/mosaic/internal/process/server"
	"github.com/mosaic-ct/mosaic/staticct"
)

// serveGCPercent is serve's GOGC unless the environment sets one (see
// tuneGC).
const serveGCPercent = 200

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML); see docs/CONFIG.md")
	dev := fs.Bool("dev", false, "run a development log with zero configuration")
	data := fs.String("data", "mosaic-dev", "with -dev: the directory holding the dev log (created if missing)")
	devMirror := fs.Bool("mirror", false, "with -dev: also run a mirror of the dev log (c2sp.org/tlog-mirror) under <prefix>mirror/, which the log pushes to (dev.json names it)")
	devWitness := fs.Bool("witness", false, "with -dev: also run a witness (c2sp.org/tlog-witness) under <prefix>witness/ that cosigns the dev log's checkpoints with Ed25519 and ML-DSA-44 (dev.json names it)")
	devTLS := fs.Bool("tls", false, "with -dev: serve HTTPS with a self-signed certificate written to the -data directory (dev.json names it, so hammer and fsck -dev trust it)")
	listen := fs.String("listen", "", "the address to listen on: with -dev, default "+devmode.DefaultListen+" for a new dev log; with -config, replaces listen[0].address")
	advertise := fs.String("advertise", "", "with -config and a standby section: the URL other processes forward submissions to (replaces standby.advertise)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic serve -config FILE [-listen ADDR] [-advertise URL]\n       mosaic serve -dev [-data DIR] [-listen ADDR] [-tls] [-witness] [-mirror]\n\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tuneGC(serveGCPercent)
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// SIGHUP reloads roots and TLS certificates (see server.Reload); it
	// must not kill the process, so it is caught from the start, and one
	// that arrives while the logs load is handled once they are up.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if *dev == (*cfgPath != "") {
		return usageError(fs, "give either -config FILE or -dev")
	}
	if *devMirror && !*dev {
		return usageError(fs, "-mirror is for -dev; with -config, add a mirror section")
	}
	if *devWitness && !*dev {
		return usageError(fs, "-witness is for -dev; with -config, add a witness section and the log's witnesses")
	}
	if *devTLS && !*dev {
		return usageError(fs, "-tls is for -dev; with -config, set listen[].tls_cert and tls_key or listen[].acme")
	}

	var lns []net.Listener
	var c *config.Config
	var devMirrorInfo *staticct.DevMirror
	var devWitnessInfo *staticct.DevWitness
	var err error
	if *dev {
		path, ln, created, err := devmode.Setup(*data, devmode.Options{Listen: *listen, TLS: *devTLS})
		if err != nil {
			return err
		}
		lns = []net.Listener{ln}
		if w := devmode.ExposedWarning(ln.Addr()); w != "" {
			logger.Warn(w)
		}
		if c, err = config.Load(path); err != nil {
			ln.Close()
			return err
		}
		// Listeners added to the dev config after the first (which
		// Setup opened: the log's origin names it) are opened as serve
		// -config would.
		for i := 1; i < len(c.Listen); i++ {
			more, err := net.Listen("tcp", c.Listen[i].Address)
			if err != nil {
				closeAll(lns)
				return fmt.Errorf("listen[%d].address: %w", i, config.ListenError(c.Listen[i].Address, err,
					fmt.Sprintf("stop it or choose another address in listen[%d].address of %s", i, path)))
			}
			lns = append(lns, more)
		}
		if created {
			if err := server.CreateLogs(ctx, c, nil, logger); err != nil {
				closeAll(lns)
				return err
			}
		}
		if *devWitness {
			if devWitnessInfo, err = devmode.AddWitness(*data, c); err != nil {
				closeAll(lns)
				return err
			}
		}
		if *devMirror {
			if devMirrorInfo, err = devmode.AddMirror(*data, c); err != nil {
				closeAll(lns)
				return err
			}
		}
	} else {
		if c, err = config.Load(*cfgPath); err != nil {
			return err
		}
		// The flags let two processes share one config file.
		if *listen != "" {
			if _, _, err := net.SplitHostPort(*listen); err != nil {
				return fmt.Errorf("-listen: %q is not host:port", *listen)
			}
			c.Listen[0].Address = *listen
		}
		if *advertise != "" {
			if c.Standby == nil {
				return errors.New("-advertise: the config has no standby section")
			}
			if err := config.ValidateAdvertise(*advertise); err != nil {
				return fmt.Errorf("-advertise: %w", err)
			}
			c.Standby.Advertise = *advertise
		}
	}
	memLimit := limitMemory(c, logger)
	srv, err := server.New(ctx, c, logger)
	if err != nil {
		for _, ln := range lns {
			ln.Close()
		}
		return err
	}
	if memLimit != 0 && c.Limits.MemoryMB == 0 {
		go followMemory(ctx, memLimit, memoryCeiling(), liveBytes, time.Second, logger)
	}
	if lns == nil {
		if lns, err = server.Listen(c); err != nil {
			return err
		}
	}
	if *dev {
		info, err := devmode.WriteInfo(*data, srv.Logs()[0], *devTLS, devMirrorInfo, devWitnessInfo)
		if err != nil {
			return fmt.Errorf("writing dev.json: %w", err)
		}
		fmt.Fprintf(os.Stderr, "Mosaic dev log is up.\n  submission prefix: %s\n  monitoring prefix: %s\n  log ID:            %s\n  test CA:           %s (key %s)\n",
			info.SubmissionPrefix, info.MonitoringPrefix, info.LogID, info.TestCACert, info.TestCAKey)
		if info.TLSCACert != "" {
			fmt.Fprintf(os.Stderr, "  TLS certificate:   %s (self-signed: curl --cacert %s)\n", info.TLSCACert, info.TLSCACert)
		}
		if devWitnessInfo != nil {
			fmt.Fprintf(os.Stderr, "  witness:           %s (vkey %s)\n", devWitnessInfo.URL, devWitnessInfo.VKeys[0])
		}
		if devMirrorInfo != nil {
			fmt.Fprintf(os.Stderr, "  mirror:            %s (vkey %s)\n", devMirrorInfo.LogPrefix, devMirrorInfo.VKeys[0])
		}
		fmt.Fprintf(os.Stderr, "  details:           %s/dev.json\n", *data)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP received")
				srv.Reload(ctx)
			}
		}
	}()
	return srv.Run(ctx, lns)
}

func runCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("create", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (YAML)")
	var names multiFlag
	fs.Var(&names, "log", "name of the log to create (repeatable; default: every log in the config)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: mosaic create -config FILE [-log NAME]...\n\nCreates a new log: signs its first (empty) checkpoint and stores it in the\nlock backend and storage. Refuses to touch a log that already has state.\n\n")
		fs.PrintDefaults()
	}
	c, err := parseConfig(fs, args, cfgPath)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	return server.CreateLogs(ctx, c, names, logger)
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// closeAll closes listeners that will not be served.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}
