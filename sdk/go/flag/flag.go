// Package flag holds the deterministic parts of the shadow-reconciler flag (docs/flag.md), the
// same as the Rust crate's: an object's ramp bucket, the ramp a rampPercent value gives, and the
// mode an object gets from the flag's mode and ramp. The shared vectors
// (tests/data/flag-vectors.json) hold both implementations to the same answers, so an object is
// on the same side of a ramp for every reader.
package flag

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
)

// Mode is off, calibrate, shadow or enforce.
type Mode string

const (
	Off Mode = "off"
	// Calibrate is the noise calibration: the control, and before each of its operations the
	// control's own code of it in dry-run, the two codes' writes compared (no candidate): every
	// difference found is noise of the comparison on this cluster.
	Calibrate Mode = "calibrate"
	Shadow    Mode = "shadow"
	Enforce   Mode = "enforce"
)

// All is the ramp of every object, in basis points.
const All = 10_000

// Bucket is the object's bucket, 0 to 9,999: the first 8 bytes of SHA-256 of its UID, read
// big-endian, modulo 10,000. Stable across restarts and replicas; an object inside a ramp of p%
// stays inside every larger ramp.
func Bucket(uid string) uint16 {
	sum := sha256.Sum256([]byte(uid))
	return uint16(binary.BigEndian.Uint64(sum[:8]) % 10_000)
}

// RampFromPercent is the ramp, in basis points, of a share of 0 to 100 percent with at most two
// decimals; false for anything else.
func RampFromPercent(percent float64) (uint16, bool) {
	if math.IsNaN(percent) || percent < 0 || percent > 100 {
		return 0, false
	}
	basis := math.Round(percent * 100)
	if math.Abs(basis-percent*100) >= 1e-6 {
		return 0, false
	}
	return uint16(basis), true
}

// Below is the mode outside a ramp: one step more cautious.
func Below(mode Mode) Mode {
	if mode == Enforce {
		return Shadow
	}
	return Off
}

// ModeFor is the mode an object gets from the flag's mode and ramp (basis points).
func ModeFor(mode Mode, ramp uint16, uid string) Mode {
	if ramp == All || Bucket(uid) < ramp {
		return mode
	}
	return Below(mode)
}
