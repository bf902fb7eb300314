package config

import "time"

// setDefaults fills in what the file leaves out, each section from its own
// defaults (acme.go, admission.go, ...); Parse calls it before Validate.
func (c *Config) setDefaults() {
	for i := range c.Listen {
		c.Listen[i].ACME.setDefaults()
	}
	c.Witness.setDefaults()
	if c.Standby != nil && c.Standby.Lease == 0 {
		c.Standby.Lease = 10 * time.Second
	}
	for i := range c.Logs {
		l := &c.Logs[i]
		if l.MonitoringPrefix == "" {
			l.MonitoringPrefix = l.SubmissionPrefix
		}
		if l.Period == 0 {
			l.Period = 200 * time.Millisecond
		}
		if l.PoolSize == 0 {
			l.PoolSize = 4000
		}
		if l.RoundTimeout == 0 {
			l.RoundTimeout = 5 * time.Second
		}
		if l.PartialTileGrace == 0 {
			l.PartialTileGrace = time.Hour
		}
		setLifecycleDefaults(l)
		if l.ReadPath == nil {
			t := true
			l.ReadPath = &t
		}
		if l.NamesTiles == nil {
			t := true
			l.NamesTiles = &t
		}
		l.setAdmissionDefaults()
		l.setReadLimitDefaults()
		l.Witnesses.setDefaults()
		if l.Lock == "" {
			if c.PostgresFor(l) != "" {
				l.Lock = "postgres"
			} else {
				l.Lock = "database"
			}
		}
		if s3 := l.Storage.S3; s3 != nil {
			if s3.ReadCacheMB == 0 {
				s3.ReadCacheMB = 256
			}
			if s3.AttemptTimeout == 0 {
				s3.AttemptTimeout = 5 * time.Second
			}
			if s3.MaxAttempts == 0 {
				s3.MaxAttempts = 3
			}
		}
	}
	c.Mirror.setDefaults()
	// Derived from the logs' periods, so after their defaults.
	if c.Standby != nil && c.Standby.ForwardTimeout == 0 {
		c.Standby.ForwardTimeout = c.longestPeriod() + forwardMargin
	}
	if c.Limits.WriteTimeout == 0 {
		c.Limits.WriteTimeout = c.DefaultWriteTimeout()
	}
	if c.Limits.IdleTimeout == 0 {
		c.Limits.IdleTimeout = 30 * time.Second
	}
}
