
r-1cyoda1.0"!EntityProcessorCalculationRequest*
authtypeuser:P{"id":"r-1","requestId":"r-1","entityId":"e","processorName":"p","success":true}