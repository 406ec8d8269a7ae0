package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in /proc;
// it is 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuSample is the CPU time used so far by some processes and by the whole
// machine.
type cpuSample struct {
	at        time.Time
	procTicks map[string]int64 // utime+stime by process name
	busy      int64            // machine ticks not idle and not waiting for I/O
	total     int64
}

// sampleCPU reads the CPU times of the named pids and of the machine.
// Processes that cannot be read are left out.
func sampleCPU(pids map[string]int) cpuSample {
	s := cpuSample{at: time.Now(), procTicks: map[string]int64{}}
	for name, pid := range pids {
		if t, err := procTicks(pid); err == nil {
			s.procTicks[name] = t
		}
	}
	s.busy, s.total = machineTicks()
	return s
}

// cores is how many CPUs each process kept busy on average between a and b,
// and the fraction of the machine's CPU time that was busy.
func cores(a, b cpuSample) (map[string]float64, float64) {
	secs := b.at.Sub(a.at).Seconds()
	out := map[string]float64{}
	for name, t := range b.procTicks {
		if t0, ok := a.procTicks[name]; ok && secs > 0 {
			out[name] = float64(t-t0) / clockTicks / secs
		}
	}
	busy := 0.0
	if d := b.total - a.total; d > 0 {
		busy = float64(b.busy-a.busy) / float64(d)
	}
	return out, busy
}

// procTicks reads utime+stime of pid from /proc/<pid>/stat.
func procTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name in parentheses may hold spaces, so
// fields are counted after its closing parenthesis.
func parseProcStat(line string) (int64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat line")
	}
	f := strings.Fields(line[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line")
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return u + s, nil
}

// machineTicks reads the first line of /proc/stat: busy and total ticks.
func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseMachineStat(line)
}

// parseMachineStat splits a "cpu user nice system idle iowait irq softirq
// steal …" line into busy (all but idle and iowait) and total ticks; guest
// time is already part of user time and is not added twice.
func parseMachineStat(line string) (busy, total int64) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest, guest_nice
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total
}

// meterCPU samples the CPU of pids at warm and at warm+window from now, the
// bounds of a closedLoop's window; wait returns what was used in between:
// cores per process and the machine's busy fraction.
func meterCPU(pids map[string]int, warm, window time.Duration) (wait func() (map[string]float64, float64)) {
	done := make(chan [2]cpuSample, 1)
	go func() {
		start := time.Now()
		time.Sleep(warm)
		a := sampleCPU(pids)
		time.Sleep(time.Until(start.Add(warm + window)))
		done <- [2]cpuSample{a, sampleCPU(pids)}
	}()
	return func() (map[string]float64, float64) {
		s := <-done
		return cores(s[0], s[1])
	}
}
