"""The provider port's adapters (`bot.core.providers`): one module per cloud, each importing its
cloud's SDK only when a cluster names that cloud (the SDK is the cloud's optional extra)."""
