
k"CalculationMemberKeepAliveEvent2
{"id":"k"}