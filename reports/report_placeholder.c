int kr_reports_placeholder(void) { return 0; }
