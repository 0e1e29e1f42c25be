/* chronyc -c tracking lines the clock tests share (test_chrony,
 * test_chronyc, test_clockoffset). */
#ifndef ES_TEST_CHRONY_LINES_H
#define ES_TEST_CHRONY_LINES_H

/* Captured from chronyc 4.3 on this machine: a client synchronised to a
 * chronyd with "local stratum 8" over loopback, that server itself, and a
 * client whose server never answered. */
static const char line_client[] =
	"7F000001,127.0.0.1,9,1795980992.461039091,-0.000000552,0.000000006,0.000000047,"
	"-0.003,0.001,0.090,0.000004005,0.000001060,0.1,Normal\n";
static const char line_local[] =
	"7F7F0101,,8,1795980982.548867548,0.000000000,0.000000000,0.000000000,0.000,0.000,"
	"0.000,0.000000000,0.000000000,0.0,Normal\n";
static const char line_unsync[] =
	"00000000,,0,0.000000000,0.000000000,0.000000000,0.000000000,0.000,0.000,0.000,"
	"1.000000000,1.000000000,0.0,Not synchronised\n";
/* The chronyc(1) tracking example in CSV form (positive System time is
 * "slow", negative Frequency is "slow"). */
static const char line_manpage[] =
	"CB00710F,203.0.113.15,3,1485510557.000000000,0.000006523,-0.000006747,0.000035822,"
	"-3.225,-0.000,0.129,0.013639022,0.001100737,64.2,Normal";

#endif
